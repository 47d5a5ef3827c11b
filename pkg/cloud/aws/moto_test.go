/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/disruption"
	"github.com/stevedore-dev/stevedore/pkg/interruption"
	"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// The names the shipped policy's placeholders are filled with (deploy/iam/README.md); the account is moto's default.
const (
	motoRegion    = "us-east-1"
	motoAccount   = "123456789012"
	motoQueue     = "stevedore-interruption"
	motoNodeRole  = "NodeRole"
	motoOldRole   = "OldNodeRole"
	motoDiscovery = "karpenter.sh/discovery"
)

// motoNotJudged are the actions of the controller policy no flow of this test exercises, and why.
var motoNotJudged = map[string]string{
	"ec2:RunInstances": "Stevedore never calls it: AWS checks it for the instances a CreateFleet launches, moto checks only ec2:CreateFleet",
	"iam:PassRole":     "moto never checks it (a launch with an instance profile needs only the EC2 action)",
	"ec2:DescribeCapacityReservations": "moto 5.2 does not implement it (HTTP 500 once allowed), so the node class selects no " +
		"capacity reservations",
	"eks:DescribeCluster": "moto answers every signed DescribeCluster with 403 SignatureDoesNotMatch once enforcement is on (it " +
		"signs a GET with the header dict as its body), whatever the policy",
	"pricing:GetProducts": "moto has no Price List backend (HTTP 500); the provider reads prices from an awsemu instance instead, " +
		"which checks no policy",
	"ec2:CreatePlacementGroup":    "moto 5.2 implements no placement groups; the node classes here select none and launch no gang",
	"ec2:DescribePlacementGroups": "moto 5.2 implements no placement groups; the node classes here select none",
	"ec2:DeletePlacementGroup":    "moto 5.2 implements no placement groups; the test runs no placement group collection",
}

// motoNotFound are the error answers the flows expect from moto, by action: lookups the code makes to learn that
// something does not exist yet, and handles.
var motoNotFound = map[string]string{
	"iam:GetInstanceProfile":      "NoSuchEntity",                                // before it creates the node class's profile
	"ec2:DescribeLaunchTemplates": "InvalidLaunchTemplateName.NotFoundException", // before it creates a launch template
}

// TestTheControllerPolicyJudgedByMoto runs Stevedore's AWS flows through the real code paths of this package (and
// of the interruption poller), as an IAM user holding deploy/iam/stevedore-controller-policy.json, against moto's
// server with IAM enforcement on: catalog discovery (instance types, offerings, spot prices), subnet, security group
// and AMI discovery (SSM parameters, DescribeImages), instance profiles (create, tag, add and remove roles, read,
// delete), a launch (CreateLaunchTemplate, CreateFleet instant, CreateTags), reboot, listing, termination, launch
// template garbage collection, and the interruption queue (GetQueueUrl, ReceiveMessage, DeleteMessage). A counting
// proxy in front of moto records every call the user makes: moto must refuse none. As controls, calls outside the
// policy (ec2:DeleteVpc, iam:CreateUser, sqs:SendMessage) must be refused, and a launch by a user whose policy lacks
// ec2:CreateFleet.
//
// The policy moto judges is the shipped one with its placeholders filled and one transformation: every statement's
// Resource is "*". moto 5.2 matches a statement's Resource only for SQS (the queue's ARN, when the request names its
// URL) and for IAM calls naming a role; every other call is checked against the resource "*", which an ARN-scoped
// statement does not match, so as shipped moto would refuse nearly every write (and sqs:GetQueueUrl) that AWS
// allows. moto ignores the Conditions of identity policies, so they are kept as shipped and are untested here, like
// the ARNs:
// TestTheCreateRequestsCarryTheTagsThePolicyRequires and TestThePolicysConditionKeysApplyToTheirActions check
// those. What this test adds to TestControllerPolicyAllowsExactlyWhatTheCodeCalls, which reads the code, is the same
// property observed at run time: no call the flows make needs an action the policy lacks. Flows moto cannot judge
// are listed in motoNotJudged.
//
// It needs moto's server (pip install 'moto[server]', 5.x): without moto_server on PATH it is skipped, unless
// STEVEDORE_REQUIRE_MOTO=1, which makes that a failure.
func TestTheControllerPolicyJudgedByMoto(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	moto := startMoto(ctx, t)
	calls := startMotoProxy(t, moto.url)

	// Seeding, with moto's enforcement still off (any credentials).
	setup := newMotoClients(moto.url, "setup", "setup")
	shipped, policyActions := motoControllerPolicy(t)
	withoutFleet := motoPolicyWithout(t, shipped, "ec2:CreateFleet")
	users := map[string]motoKey{}
	for _, u := range []struct{ name, policy string }{
		{"stevedore", shipped},
		{"stevedore-without-createfleet", withoutFleet},
		{"admin", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}`},
	} {
		key, err := setup.user(ctx, u.name, u.policy)
		if err != nil {
			t.Fatalf("creating the IAM user %s in moto: %v", u.name, err)
		}
		users[u.name] = key
	}
	seeded, err := setup.seed(ctx)
	if err != nil {
		t.Fatalf("seeding moto: %v", err)
	}
	if err := motoResetAuth(ctx, moto.url, "0"); err != nil {
		t.Fatalf("turning moto's IAM enforcement on: %v", err)
	}
	admin := newMotoClients(moto.url, users["admin"].id, users["admin"].secret)
	if _, err := setup.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}); err == nil {
		t.Fatalf("moto still answers the setup credentials after POST /moto-api/reset-auth 0: IAM is not enforced, the test would prove nothing")
	}

	// Prices come from awsemu (moto has no Price List API); everything else goes to moto through the counting proxy.
	cat, err := catalog.ForRegion(motoRegion)
	if err != nil {
		t.Fatal(err)
	}
	emu, err := awsemu.Start(awsemu.Options{ClusterName: testCluster, Catalog: cat})
	if err != nil {
		t.Fatalf("starting awsemu for the prices: %v", err)
	}
	t.Cleanup(emu.Stop)
	classes, err := test.NewListers(motoNodeClass("default"), motoNodeClass("adopted"))
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	p := newMotoProvider(ctx, t, calls.url, emu.URL(), users["stevedore"], classes, clk)

	// Discovery: the catalog from DescribeInstanceTypes, DescribeInstanceTypeOfferings and DescribeSpotPriceHistory.
	if got := p.Catalog(ctx); p.CatalogError() != nil || len(got.InstanceTypes) == 0 {
		t.Fatalf("reading the catalog from moto: %v (%d instance types, source %q)", p.CatalogError(), len(got.InstanceTypes), got.Source)
	}
	// Subnets, security groups, AMIs (through moto's public AL2023 SSM parameters: moto has none of the EKS-optimized
	// AMI parameters an alias reads, and refuses to create parameters under /aws), and the managed instance
	// profiles: created for "default" (GetInstanceProfile, CreateInstanceProfile, AddRoleToInstanceProfile), taken
	// over for "adopted", whose profile the seeding created with only the ownership tag and another role
	// (TagInstanceProfile, RemoveRoleFromInstanceProfile, AddRoleToInstanceProfile).
	for _, name := range []string{"default", "adopted"} {
		nc, err := classes.EC2NodeClasses.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		res, err := p.Resolve(ctx, nc)
		if err != nil {
			t.Fatalf("resolving EC2NodeClass %s against moto: %v", name, err)
		}
		if len(res.Problems) > 0 || len(res.Subnets) != 2 || len(res.SecurityGroupIDs) != 1 || len(res.AMIs) != 2 {
			t.Fatalf("EC2NodeClass %s resolved to subnets %v, security groups %v, AMIs %v, problems %q; want the 2 seeded subnets, "+
				"the seeded security group, an amd64 and an arm64 AMI and no problem", name, res.Subnets, res.SecurityGroupIDs, res.AMIs, res.Problems)
		}
		if roles, err := admin.profileRoles(ctx, res.InstanceProfile); err != nil || !slices.Equal(roles, []string{motoNodeRole}) {
			t.Fatalf("instance profile %s of EC2NodeClass %s holds roles %v (%v), want [%s]", res.InstanceProfile, name, roles, err, motoNodeRole)
		}
	}

	// Launch: DescribeInstances (an instance of the NodeClaim already?), DescribeLaunchTemplates, CreateLaunchTemplate,
	// CreateFleet (instant), CreateTags (the NodeClaim's name), DescribeInstances.
	nodeClaim := test.NodeClaim("moto-1", "default").Require(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large").
		Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, stevedorev1.CapacityTypeOnDemand).Obj()
	inst, err := p.Create(ctx, nodeClaim)
	if err != nil {
		t.Fatalf("launching a NodeClaim through moto: %v", err)
	}
	tags, err := admin.instanceTags(ctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{OwnershipTag(testCluster): ownedTagValue, TagNodePool: "default", TagNodeClaim: "moto-1", TagName: "default/moto-1"} {
		if tags[k] != v {
			t.Errorf("launched instance %s has tag %s=%q, want %q (tags %v)", inst.ID, k, tags[k], v, tags)
		}
	}

	// Interruption: the poller resolves the queue by name (GetQueueUrl), receives the notice the admin sends for the
	// instance (ReceiveMessage), hands the NodeClaim to disruption and deletes the message (DeleteMessage).
	motoInterruption(ctx, t, p, admin, seeded.queueURL, inst.ID, calls, users["stevedore"].id)

	// Reboot and the garbage collector's reads: DescribeInstances, RebootInstances, DescribeInstances (List).
	if err := p.Reboot(ctx, inst.ID); err != nil {
		t.Fatalf("rebooting %s: %v", inst.ID, err)
	}
	live, err := p.List(ctx)
	if err != nil || len(live) != 1 || live[0].ID != inst.ID {
		t.Fatalf("listing the cluster's instances gave %v (%v), want the one launched, %s", live, err, inst.ID)
	}
	// Termination: DescribeInstances, TerminateInstances.
	if err := p.Delete(ctx, inst.ID); err != nil {
		t.Fatalf("terminating %s: %v", inst.ID, err)
	}
	if state, err := admin.instanceState(ctx, inst.ID); err != nil || (state != "shutting-down" && state != "terminated") {
		t.Fatalf("instance %s is %q (%v) after Delete, want shutting-down or terminated", inst.ID, state, err)
	}
	// EFA: a NodeClaim whose pods request vpc.amazonaws.com/efa launches from a launch template whose network
	// interfaces are the type's EFA interfaces (p4d.24xlarge: four, one per network card).
	efaClaim := test.NodeClaim("moto-efa", "default").Require(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "p4d.24xlarge").
		Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, stevedorev1.CapacityTypeOnDemand).
		Requests(stevedorev1.ResourceEFA, "4", "nvidia.com/gpu", "8").Obj()
	efaInst, err := p.Create(ctx, efaClaim)
	if err != nil {
		t.Fatalf("launching a NodeClaim whose pods request EFA through moto: %v", err)
	}
	if got := calls.efaInterfacesRequested(users["stevedore"].id); got != 4 {
		t.Errorf("the launch template of the EFA launch asked moto for %d EFA interfaces, want 4", got)
	}
	if err := p.Delete(ctx, efaInst.ID); err != nil {
		t.Fatalf("terminating %s: %v", efaInst.ID, err)
	}
	// Launch template garbage collection: DescribeLaunchTemplates, and once the templates have been idle for
	// LaunchTemplateIdle, DeleteLaunchTemplate.
	if n, err := p.CollectLaunchTemplates(ctx); err != nil || n != 0 {
		t.Fatalf("collecting launch templates right after the launch deleted %d (%v), want none", n, err)
	}
	clk.Step(LaunchTemplateIdle)
	if n, err := p.CollectLaunchTemplates(ctx); err != nil || n != 2 {
		t.Fatalf("collecting launch templates idle for %s deleted %d (%v), want the two of the launches", LaunchTemplateIdle, n, err)
	}
	// The node classes' deletion: GetInstanceProfile, RemoveRoleFromInstanceProfile, DeleteInstanceProfile.
	for _, name := range []string{"default", "adopted"} {
		if err := p.discovery.profiles.remove(ctx, name); err != nil {
			t.Fatalf("deleting the instance profile of EC2NodeClass %s: %v", name, err)
		}
		profile := ManagedInstanceProfileName(testCluster, motoRegion, name)
		if _, err := admin.profileRoles(ctx, profile); !isNoSuchEntity(err) {
			t.Fatalf("instance profile %s still readable after its removal (%v), want NoSuchEntity", profile, err)
		}
	}

	flows := calls.of(users["stevedore"].id)
	verdict := "all allowed"
	if n := checkMotoFlows(t, flows, policyActions); n > 0 {
		verdict = fmt.Sprintf("%d REFUSED", n)
	}

	// Controls: calls outside the policy, as the same user, are refused.
	stevedore := newMotoClients(calls.url, users["stevedore"].id, users["stevedore"].secret)
	var refused []string
	for _, c := range []struct {
		action string
		call   func(context.Context) error
	}{
		{"ec2:DeleteVpc", func(ctx context.Context) error {
			_, err := stevedore.ec2.DeleteVpc(ctx, &ec2.DeleteVpcInput{VpcId: aws.String(seeded.vpcID)})
			return err
		}},
		{"iam:CreateUser", func(ctx context.Context) error {
			_, err := stevedore.iam.CreateUser(ctx, &iam.CreateUserInput{UserName: aws.String("intruder")})
			return err
		}},
		{"sqs:SendMessage", func(ctx context.Context) error {
			_, err := stevedore.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(seeded.queueURL), MessageBody: aws.String("{}")})
			return err
		}},
	} {
		err := c.call(ctx)
		if !motoRefusal(err) {
			t.Errorf("%s outside the policy: got %v, want a refusal (HTTP 403, AccessDenied): moto does not enforce the policy", c.action, err)
			continue
		}
		if !slices.ContainsFunc(calls.of(users["stevedore"].id), func(m motoCall) bool { return m.action == c.action && m.refused() }) {
			t.Errorf("%s was refused, but the proxy saw no refused %s: the counting misses calls", c.action, c.action)
			continue
		}
		refused = append(refused, c.action)
	}

	// Control: a user whose policy lacks ec2:CreateFleet cannot launch; every other call of the launch is allowed.
	noFleet := newMotoProvider(ctx, t, calls.url, emu.URL(), users["stevedore-without-createfleet"], classes, clocktesting.NewFakeClock(time.Now()))
	control := test.NodeClaim("moto-control", "default").Require(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large").
		Require(stevedorev1.LabelCapacityType, corev1.NodeSelectorOpIn, stevedorev1.CapacityTypeOnDemand).Obj()
	if inst, err := noFleet.Create(ctx, control); err == nil {
		t.Errorf("a user whose policy lacks ec2:CreateFleet launched %s", inst.ID)
	} else {
		t.Logf("the launch without ec2:CreateFleet failed, as it must: %v", err)
	}
	var fleetRefused bool
	for _, c := range calls.of(users["stevedore-without-createfleet"].id) {
		switch {
		case c.action == "ec2:CreateFleet" && c.refused():
			fleetRefused = true
		case c.refused():
			t.Errorf("the launch without ec2:CreateFleet: moto refused %s too (%d %s)", c.action, c.status, c.code)
		}
	}
	if !fleetRefused {
		t.Errorf("the launch without ec2:CreateFleet failed, but not because moto refused ec2:CreateFleet: %v", calls.of(users["stevedore-without-createfleet"].id))
	} else {
		refused = append(refused, "ec2:CreateFleet (policy without it)")
	}

	judged, distinct := 0, map[string]bool{}
	for _, c := range flows {
		if !c.abandoned {
			judged++
			distinct[c.action] = true
		}
	}
	t.Logf("moto %s: %d calls (%d distinct actions) as the shipped policy, %s; refused controls: %s",
		moto.version, judged, len(distinct), verdict, strings.Join(refused, ", "))
}

// checkMotoFlows checks the calls the stevedore user made in the flows: moto refused none, every other error is a
// lookup the code expects to fail, every action of the policy but those of motoNotJudged was exercised, and none
// outside it. It returns how many calls moto refused.
func checkMotoFlows(t *testing.T, flows []motoCall, policyActions []string) int {
	t.Helper()
	if len(flows) == 0 {
		t.Fatalf("the proxy saw no call by the stevedore user: the provider did not go through it")
	}
	counts := map[string]int{}
	abandoned, refused := 0, 0
	for _, c := range flows {
		switch {
		case c.abandoned:
			// the poller's last long poll, cancelled when the test stopped it: no answer to judge
			abandoned++
			continue
		case c.refused():
			refused++
			t.Errorf("moto refused %s to the shipped policy (HTTP %d, %s): the policy lacks an action the code calls", c.action, c.status, c.code)
		case c.status >= 300 && motoNotFound[c.action] != c.code:
			t.Errorf("%s failed in moto (HTTP %d, %s)", c.action, c.status, c.code)
		}
		counts[c.action]++
	}
	var exercised []string
	for _, a := range slices.Sorted(maps.Keys(counts)) {
		exercised = append(exercised, fmt.Sprintf("%s×%d", a, counts[a]))
		if !slices.Contains(policyActions, a) {
			t.Errorf("the flows called %s, which the policy does not list, and moto allowed it", a)
		}
	}
	t.Logf("actions exercised as the shipped policy (%d, %d calls; %d abandoned long polls not judged): %s",
		len(counts), len(flows)-abandoned, abandoned, strings.Join(exercised, " "))
	for _, a := range policyActions {
		if reason, ok := motoNotJudged[a]; ok {
			t.Logf("not judged by moto: %s: %s", a, reason)
			continue
		}
		if counts[a] == 0 {
			t.Errorf("the policy allows %s, which no flow exercised: exercise it, or say in motoNotJudged why moto cannot judge it", a)
		}
	}
	if len(counts) < 20 {
		t.Errorf("only %d distinct actions exercised, want at least 20", len(counts))
	}
	return refused
}

// motoInterruption runs the interruption poller on the provider's SQS client until it has handed the NodeClaim of
// an instance to disruption for the notice the admin sends, and deleted the message.
func motoInterruption(ctx context.Context, t *testing.T, p *Provider, admin *motoClients, queueURL, instanceID string, calls *motoCallLog, principal string) {
	t.Helper()
	body := fmt.Sprintf(`{"version":"0","id":"moto-1","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2",`+
		`"account":%q,"time":%q,"region":%q,"resources":[],"detail":{"instance-id":%q,"state":"stopping"}}`,
		motoAccount, time.Now().UTC().Format(time.RFC3339), motoRegion, instanceID)
	if _, err := admin.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(body)}); err != nil {
		t.Fatalf("sending the interruption notice as the admin: %v", err)
	}
	claims, err := test.NewListers(test.NodeClaim("moto-1", "default").InstanceID(instanceID).Obj())
	if err != nil {
		t.Fatal(err)
	}
	rec := &motoInterrupter{}
	poller := interruption.New(interruption.Options{Args: config.ProvisionerArgs{InterruptionQueue: motoQueue}, Queue: p.SQS(),
		NodeClaims: claims.NodeClaims, Interrupter: rec, WaitTime: time.Second})
	pollCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		poller.Run(pollCtx)
	}()
	deleted := func() bool {
		return slices.ContainsFunc(calls.of(principal), func(c motoCall) bool { return c.action == "sqs:DeleteMessage" && c.status == http.StatusOK })
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return len(rec.requests()) > 0 && deleted(), nil
	})
	stop()
	<-done
	if err != nil {
		t.Fatalf("the interruption poller did not handle the notice and delete it within a minute (requests %v, message deleted %t): %v",
			rec.requests(), deleted(), err)
	}
	want := disruption.InterruptRequest{NodeClaim: "moto-1", Reason: interruption.ReasonInstanceStateChange, Forceful: true}
	if got := rec.requests(); len(got) != 1 || got[0] != want {
		t.Fatalf("the poller asked disruption for %+v, want %+v", got, want)
	}
}

// motoInterrupter records what the interruption poller asks of disruption.
type motoInterrupter struct {
	mu   sync.Mutex
	reqs []disruption.InterruptRequest
}

func (r *motoInterrupter) Interrupt(_ context.Context, req disruption.InterruptRequest) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	return nil
}

func (r *motoInterrupter) requests() []disruption.InterruptRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

// motoNodeClass is an EC2NodeClass selecting the seeded subnets and security group, moto's public AL2023 AMIs
// through their SSM parameters, and the node role (with the finalizer that lets its instance profile be created).
func motoNodeClass(name string) *stevedorev1.EC2NodeClass {
	const amis = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-"
	return &stevedorev1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Finalizers: []string{stevedorev1.TerminationFinalizer}},
		Spec: stevedorev1.EC2NodeClassSpec{Role: motoNodeRole,
			SubnetSelectorTerms:        []stevedorev1.SubnetSelectorTerm{{Tags: map[string]string{motoDiscovery: testCluster}}},
			SecurityGroupSelectorTerms: []stevedorev1.SecurityGroupSelectorTerm{{Tags: map[string]string{motoDiscovery: testCluster}}},
			AMISelectorTerms:           []stevedorev1.AMISelectorTerm{{SSMParameter: amis + "x86_64"}, {SSMParameter: amis + "arm64"}},
			Tags:                       map[string]string{"team": "platform"}},
	}
}

// newMotoProvider builds the provider as the scheduler does, from an environment: EC2, IAM, SQS and SSM at the
// counting proxy in front of moto, the Price List API at awsemu, a user's credentials.
func newMotoProvider(ctx context.Context, t *testing.T, proxyURL, pricingURL string, key motoKey, l *test.Listers, clk *clocktesting.FakeClock) *Provider {
	t.Helper()
	env := map[string]string{
		"AWS_ENDPOINT_URL_EC2": proxyURL, "AWS_ENDPOINT_URL_IAM": proxyURL, "AWS_ENDPOINT_URL_SQS": proxyURL, "AWS_ENDPOINT_URL_SSM": proxyURL,
		"AWS_ENDPOINT_URL_PRICING": pricingURL,
		"AWS_ACCESS_KEY_ID":        key.id, "AWS_SECRET_ACCESS_KEY": key.secret, "AWS_EC2_METADATA_DISABLED": "true",
	}
	p, err := New(ctx, Options{
		ClusterName: testCluster, ClusterEndpoint: "https://api.example", CABundle: []byte("-----BEGIN CERTIFICATE-----\n"),
		ServiceCIDR: "10.100.0.0/16", Region: motoRegion, KubernetesVersion: func(context.Context) (string, error) { return "1.37", nil },
		Env: func(k string) string { return env[k] }, NodeClasses: l.EC2NodeClasses, VMMemoryOverheadPercent: 7.5, Clock: clk,
	})
	if err != nil {
		t.Fatalf("building the provider: %v", err)
	}
	return p
}

// motoControllerPolicy returns the shipped controller policy with its placeholders filled and every statement's
// Resource "*" (Actions, Effects and Conditions as shipped), and the actions it allows.
func motoControllerPolicy(t *testing.T) (string, []string) {
	t.Helper()
	raw, err := os.ReadFile("../../../deploy/iam/stevedore-controller-policy.json")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer("${AWS_PARTITION}", "aws", "${AWS_REGION}", motoRegion, "${AWS_ACCOUNT_ID}", motoAccount,
		"${CLUSTER_NAME}", testCluster, "${QUEUE_NAME}", motoQueue, "${NODE_ROLE_NAME}", motoNodeRole).Replace(string(raw))
	if left := regexp.MustCompile(`\$\{[A-Z_]+\}`).FindAllString(text, -1); len(left) > 0 {
		t.Fatalf("the policy has placeholders this test does not fill: %v", left)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatalf("the policy is not valid JSON: %v", err)
	}
	statements, _ := doc["Statement"].([]any)
	var actions []string
	for _, s := range statements {
		st, ok := s.(map[string]any)
		if !ok {
			t.Fatalf("a statement of the policy is not an object: %v", s)
		}
		st["Resource"] = "*"
		actions = append(actions, motoActions(st)...)
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(actions)
	return string(out), slices.Compact(actions)
}

// motoPolicyWithout returns a policy document without an action (a statement left with none is dropped).
func motoPolicyWithout(t *testing.T, policy, action string) string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(policy), &doc); err != nil {
		t.Fatal(err)
	}
	var kept []any
	for _, s := range doc["Statement"].([]any) {
		st := s.(map[string]any)
		actions := slices.DeleteFunc(motoActions(st), func(a string) bool { return a == action })
		if len(actions) == 0 {
			continue
		}
		st["Action"] = actions
		kept = append(kept, st)
	}
	doc["Statement"] = kept
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), `"`+action+`"`) {
		t.Fatalf("%s is still in the policy after its removal", action)
	}
	return string(out)
}

// motoActions are the actions of a statement (a string or a list).
func motoActions(st map[string]any) []string {
	switch a := st["Action"].(type) {
	case string:
		return []string{a}
	case []any:
		out := make([]string, 0, len(a))
		for _, v := range a {
			if s, ok := v.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// motoServer is a running moto_server.
type motoServer struct {
	url, version string
}

// startMoto starts moto_server on a free loopback port and waits until it answers; it is killed when the test ends.
func startMoto(ctx context.Context, t *testing.T) *motoServer {
	t.Helper()
	path, err := exec.LookPath("moto_server")
	if err != nil {
		if os.Getenv("STEVEDORE_REQUIRE_MOTO") == "1" {
			t.Fatalf("moto_server is not on PATH (%v), and STEVEDORE_REQUIRE_MOTO=1 requires it: pip install 'moto[server]' (5.x)", err)
		}
		t.Skipf("moto_server is not on PATH (%v): skipped (STEVEDORE_REQUIRE_MOTO=1 makes this a failure)", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var log motoLog
	cmd := exec.Command(path, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() {
		exitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // already gone when it exited on its own
		<-exited
		if t.Failed() {
			t.Logf("moto_server's output (the end):\n%s", log.tail(8000))
		}
	})
	server := &motoServer{url: "http://127.0.0.1:" + strconv.Itoa(port), version: motoVersion(ctx, path)}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			if exitErr == nil {
				return false, errors.New("moto_server exited with status 0")
			}
			return false, fmt.Errorf("moto_server exited: %w", exitErr)
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, server.url+"/moto-api/", nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil // not listening yet
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("moto_server on port %d did not answer within a minute: %v\n%s", port, err, log.tail(8000))
	}
	klog.FromContext(ctx).Info("moto_server is up", "url", server.url, "version", server.version)
	return server
}

// motoVersion asks the Python beside moto_server (a pyenv shim or a virtualenv's bin) for moto's version.
func motoVersion(ctx context.Context, motoServerPath string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(filepath.Dir(motoServerPath), "python3"), "-c", "import moto; print(moto.__version__)").Output()
	if err != nil {
		return "(version unknown)"
	}
	return strings.TrimSpace(string(out))
}

// motoLog keeps a process's output.
type motoLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *motoLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *motoLog) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buf.Bytes()
	return string(b[max(0, len(b)-n):])
}

// motoResetAuth sets how many more calls moto lets through unchecked ("0": enforce from now on, "inf": never).
func motoResetAuth(ctx context.Context, base, limit string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/moto-api/reset-auth", strings.NewReader(limit))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "text/plain") // a form content type makes moto answer 500
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("POST /moto-api/reset-auth: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /moto-api/reset-auth %s: HTTP %d: %s", limit, resp.StatusCode, body)
	}
	return nil
}

// motoCall is one AWS call the proxy passed to moto.
type motoCall struct {
	// principal is the access key id that signed it; action is "<service>:<Operation>"
	principal, action string
	status            int
	// code is the error code of a failed call
	code string
	// abandoned: the client gave up before the answer (a long poll cancelled)
	abandoned bool
	// form is the request's parameters, for the Query protocol (EC2, IAM)
	form url.Values
}

// refused reports whether moto's IAM check refused the call: EC2 and IAM answer AccessDenied, the JSON services
// (SQS, SSM) an XML body with HTTP 403.
func (c motoCall) refused() bool {
	return c.status == http.StatusForbidden || c.code == "AccessDenied" || c.code == "AccessDeniedException" || c.code == "UnauthorizedOperation"
}

// motoCallLog is a reverse proxy in front of moto that records each call: who signed it, its action, moto's answer.
// The provider takes its endpoints from the environment and builds its own HTTP clients, so a proxy, which sees
// every call whatever client makes it, is where they are counted.
type motoCallLog struct {
	url string

	mu    sync.Mutex
	calls []motoCall
}

type motoRequestKey struct{}

var (
	motoCredential = regexp.MustCompile(`Credential=([^/]+)/[^/]+/[^/]+/([^/]+)/aws4_request`)
	motoXMLCode    = regexp.MustCompile(`<Code>([^<]+)</Code>`)
	motoJSONCode   = regexp.MustCompile(`"__type"\s*:\s*"(?:[^"#]*#)?([^"]+)"`)
)

func startMotoProxy(t *testing.T, target string) *motoCallLog {
	t.Helper()
	to, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	log := &motoCallLog{}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(to)
			r.Out.Host = r.In.Host // the Host header is signed: moto checks the signature against it
		},
		ModifyResponse: func(resp *http.Response) error {
			call := resp.Request.Context().Value(motoRequestKey{}).(*motoCall)
			call.status = resp.StatusCode
			if resp.StatusCode >= 300 {
				body, err := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if err != nil {
					return err
				}
				resp.Body = io.NopCloser(bytes.NewReader(body))
				if m := motoXMLCode.FindSubmatch(body); m != nil {
					call.code = string(m[1])
				} else if m := motoJSONCode.FindSubmatch(body); m != nil {
					call.code = string(m[1])
				}
			}
			log.record(*call)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			call := r.Context().Value(motoRequestKey{}).(*motoCall)
			call.abandoned, call.status, call.code = r.Context().Err() != nil, http.StatusBadGateway, err.Error()
			log.record(*call)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		call := &motoCall{principal: "?", action: "?"}
		service := "?"
		if m := motoCredential.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
			call.principal, service = m[1], m[2]
		}
		if target := r.Header.Get("X-Amz-Target"); target != "" { // JSON protocols: AmazonSQS.ReceiveMessage
			_, op, _ := strings.Cut(target, ".")
			call.action = service + ":" + op
		} else if form, err := url.ParseQuery(string(body)); err == nil && form.Get("Action") != "" { // Query: EC2, IAM
			call.action, call.form = service+":"+form.Get("Action"), form
		}
		proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), motoRequestKey{}, call)))
	}))
	t.Cleanup(server.Close)
	log.url = server.URL
	return log
}

// efaInterfacesRequested counts the EFA interfaces (InterfaceType efa) in the launch templates the principal
// created.
func (l *motoCallLog) efaInterfacesRequested(principal string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.calls {
		if c.principal != principal || c.action != "ec2:CreateLaunchTemplate" {
			continue
		}
		for key, values := range c.form {
			if strings.HasPrefix(key, "LaunchTemplateData.NetworkInterface.") && strings.HasSuffix(key, ".InterfaceType") && slices.Contains(values, "efa") {
				n++
			}
		}
	}
	return n
}

func (l *motoCallLog) record(c motoCall) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
}

// of returns the calls an access key signed, in order.
func (l *motoCallLog) of(principal string) []motoCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []motoCall
	for _, c := range l.calls {
		if c.principal == principal {
			out = append(out, c)
		}
	}
	return out
}

// motoRefusal reports whether an SDK error is moto's IAM refusal: HTTP 403, or an AccessDenied code.
func motoRefusal(err error) bool {
	if err == nil {
		return false
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusForbidden {
		return true
	}
	code := errorCode(err)
	return code == "AccessDenied" || code == "AccessDeniedException" || code == "UnauthorizedOperation"
}

// motoKey is an IAM user's access key.
type motoKey struct{ id, secret string }

// motoClients are SDK clients signing with one key, for the seeding, the admin's checks and the controls.
type motoClients struct {
	ec2 *ec2.Client
	iam *iam.Client
	sqs *sqs.Client
}

func newMotoClients(endpoint, id, secret string) *motoClients {
	cfg := aws.Config{Region: motoRegion, Credentials: credentials.NewStaticCredentialsProvider(id, secret, ""),
		HTTPClient: bodyReadOnlyClient{next: awshttp.NewBuildableClient()}, RetryMaxAttempts: 1}
	return &motoClients{
		ec2: ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(endpoint) }),
		iam: iam.NewFromConfig(cfg, func(o *iam.Options) { o.BaseEndpoint = aws.String(endpoint) }),
		sqs: sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) }),
	}
}

// user creates an IAM user with an inline policy, and its access key.
func (c *motoClients) user(ctx context.Context, name, policy string) (motoKey, error) {
	if _, err := c.iam.CreateUser(ctx, &iam.CreateUserInput{UserName: aws.String(name)}); err != nil {
		return motoKey{}, fmt.Errorf("CreateUser: %w", err)
	}
	if _, err := c.iam.PutUserPolicy(ctx, &iam.PutUserPolicyInput{UserName: aws.String(name), PolicyName: aws.String("policy"),
		PolicyDocument: aws.String(policy)}); err != nil {
		return motoKey{}, fmt.Errorf("PutUserPolicy: %w", err)
	}
	out, err := c.iam.CreateAccessKey(ctx, &iam.CreateAccessKeyInput{UserName: aws.String(name)})
	if err != nil {
		return motoKey{}, fmt.Errorf("CreateAccessKey: %w", err)
	}
	return motoKey{id: aws.ToString(out.AccessKey.AccessKeyId), secret: aws.ToString(out.AccessKey.SecretAccessKey)}, nil
}

// motoSeeded is what the seeding created.
type motoSeeded struct {
	vpcID, queueURL string
}

// seed creates what the flows need: the node role, an instance profile for EC2NodeClass "adopted" holding another
// role and only the ownership tag (the case the provider tags and fixes), two subnets and a security group tagged
// for discovery, and the interruption queue. moto's built-in AMIs and their public SSM parameters serve as images.
func (c *motoClients) seed(ctx context.Context) (motoSeeded, error) {
	trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`
	for _, role := range []string{motoNodeRole, motoOldRole} {
		if _, err := c.iam.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(role), AssumeRolePolicyDocument: aws.String(trust)}); err != nil {
			return motoSeeded{}, fmt.Errorf("creating role %s: %w", role, err)
		}
	}
	adopted := ManagedInstanceProfileName(testCluster, motoRegion, "adopted")
	if _, err := c.iam.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(adopted),
		Path: aws.String(managedProfilePath(testCluster, motoRegion)),
		Tags: []iamtypes.Tag{{Key: aws.String(OwnershipTag(testCluster)), Value: aws.String(ownedTagValue)}}}); err != nil {
		return motoSeeded{}, fmt.Errorf("creating instance profile %s: %w", adopted, err)
	}
	if _, err := c.iam.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(adopted),
		RoleName: aws.String(motoOldRole)}); err != nil {
		return motoSeeded{}, fmt.Errorf("adding role %s to instance profile %s: %w", motoOldRole, adopted, err)
	}
	discovery := func(kind ec2types.ResourceType) []ec2types.TagSpecification {
		return []ec2types.TagSpecification{{ResourceType: kind, Tags: []ec2types.Tag{{Key: aws.String(motoDiscovery), Value: aws.String(testCluster)}}}}
	}
	vpc, err := c.ec2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.42.0.0/16")})
	if err != nil {
		return motoSeeded{}, fmt.Errorf("creating the VPC: %w", err)
	}
	seeded := motoSeeded{vpcID: aws.ToString(vpc.Vpc.VpcId)}
	for i, zone := range []string{motoRegion + "a", motoRegion + "b"} {
		if _, err := c.ec2.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, AvailabilityZone: aws.String(zone),
			CidrBlock: aws.String(fmt.Sprintf("10.42.%d.0/24", i+1)), TagSpecifications: discovery(ec2types.ResourceTypeSubnet)}); err != nil {
			return motoSeeded{}, fmt.Errorf("creating a subnet in %s: %w", zone, err)
		}
	}
	if _, err := c.ec2.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String("stevedore-nodes"),
		Description: aws.String("nodes"), VpcId: vpc.Vpc.VpcId, TagSpecifications: discovery(ec2types.ResourceTypeSecurityGroup)}); err != nil {
		return motoSeeded{}, fmt.Errorf("creating the security group: %w", err)
	}
	queue, err := c.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(motoQueue)})
	if err != nil {
		return motoSeeded{}, fmt.Errorf("creating queue %s: %w", motoQueue, err)
	}
	seeded.queueURL = aws.ToString(queue.QueueUrl)
	return seeded, nil
}

// profileRoles returns the roles an instance profile holds.
func (c *motoClients) profileRoles(ctx context.Context, name string) ([]string, error) {
	out, err := c.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil {
		return nil, fmt.Errorf("reading instance profile %s: %w", name, err)
	}
	var roles []string
	for _, r := range out.InstanceProfile.Roles {
		roles = append(roles, aws.ToString(r.RoleName))
	}
	return roles, nil
}

func (c *motoClients) instance(ctx context.Context, id string) (ec2types.Instance, error) {
	out, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		return ec2types.Instance{}, fmt.Errorf("describing %s: %w", id, err)
	}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			return i, nil
		}
	}
	return ec2types.Instance{}, fmt.Errorf("describing %s: no such instance", id)
}

func (c *motoClients) instanceTags(ctx context.Context, id string) (map[string]string, error) {
	i, err := c.instance(ctx, id)
	if err != nil {
		return nil, err
	}
	tags := map[string]string{}
	for _, tag := range i.Tags {
		tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
	}
	return tags, nil
}

func (c *motoClients) instanceState(ctx context.Context, id string) (string, error) {
	i, err := c.instance(ctx, id)
	if err != nil || i.State == nil {
		return "", err
	}
	return string(i.State.Name), nil
}
