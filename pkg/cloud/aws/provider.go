/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

// Package aws implements Stevedore's cloud provider on aws-sdk-go-v2: CreateFleet launches, TerminateInstances,
// subnet, security group and AMI discovery, launch templates with AL2023 and Bottlerocket user data, and the
// instance-type catalog from the EC2 and pricing APIs.
package aws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/metrics"
)

// Tag keys Stevedore puts on every resource it creates.
const (
	TagNodePool       = stevedorev1.LabelNodePool
	TagNodeClaim      = stevedorev1.LabelNodeClaim
	TagEKSClusterName = "eks:eks-cluster-name"
	TagName           = "Name"
)

// OwnershipTag is the tag that marks an EC2 resource as belonging to a cluster.
func OwnershipTag(clusterName string) string { return "kubernetes.io/cluster/" + clusterName }

// ownedTagValue is the value of the OwnershipTag of a resource the cluster owns.
const ownedTagValue = "owned"

// Options configure the provider.
type Options struct {
	ClusterName     string
	ClusterEndpoint string
	// CABundle is the cluster CA certificate (PEM) new nodes trust.
	CABundle []byte
	// ServiceCIDR of the cluster, for nodeadm.
	ServiceCIDR string
	Region      string
	// KubernetesVersion reads the API server's minor version ("1.37"), which selects the EKS-optimized AMIs: at
	// start and every KubernetesVersionCheckInterval (default config.DefaultKubernetesVersionCheckInterval) while
	// FollowKubernetesVersion runs.
	KubernetesVersion              func(context.Context) (string, error)
	KubernetesVersionCheckInterval time.Duration
	// Env looks up AWS settings (endpoints, credentials); default os.Getenv.
	Env func(string) string
	// NodeClasses reads EC2NodeClasses.
	NodeClasses listers.EC2NodeClassLister
	// MaxInstanceTypes caps the instance types offered to one CreateFleet call.
	MaxInstanceTypes int
	// VMMemoryOverheadPercent is the share of nominal memory an instance does not report.
	VMMemoryOverheadPercent float64
	// Fallback is the catalog used when the APIs cannot be read and none was read before, if EmbeddedCatalog and in
	// its own region only, and whose on-demand prices serve when the Price List API cannot be read or the partition
	// has none; default the region's embedded catalog.
	Fallback        *catalog.File
	EmbeddedCatalog bool
	// Clock times the caches (unavailable offerings, discovery, catalog); default the real one.
	Clock clock.Clock
	// FleetBatchWindow is how long identical launches wait to share a CreateFleet call; default 25ms.
	FleetBatchWindow time.Duration
	// RequestTimeout bounds one attempt of an AWS API call; the SDK retries an attempt that times out. Default
	// 30s (an instant CreateFleet answers within seconds).
	RequestTimeout time.Duration
}

// Provider is the AWS cloud provider.
type Provider struct {
	opts        Options
	ec2         *ec2.Client
	sqs         *sqs.Client
	discovery   *discovery
	k8sVersion  *kubernetesVersion
	catalog     *catalogSource
	unavailable *cloud.UnavailableOfferings
	types       typeCache
	fleets      *fleetBatcher
	terminator  *terminateBatcher

	// ltMu guards templates, templateUsed and groupUsed
	ltMu      sync.Mutex
	templates map[string]string // launch template name -> id
	// templateUsed is when this process last launched with (or first saw) each of the cluster's launch templates
	templateUsed map[string]time.Time
	// groupUsed is the same for the placement groups of gangs
	groupUsed map[string]time.Time
}

var _ cloud.Provider = &Provider{}

// New builds the provider and its SDK clients: the default credential chain (IRSA and EKS Pod Identity
// included), and the standard AWS_ENDPOINT_URL_<SERVICE> overrides read through opts.Env.
func New(ctx context.Context, opts Options) (*Provider, error) {
	if opts.Env == nil {
		opts.Env = os.Getenv
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.MaxInstanceTypes == 0 {
		opts.MaxInstanceTypes = config.DefaultMaxInstanceTypes
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = 30 * time.Second
	}
	if opts.KubernetesVersion == nil {
		return nil, errors.New("the provider needs to read the API server's Kubernetes version (Options.KubernetesVersion)")
	}
	if opts.KubernetesVersionCheckInterval == 0 {
		opts.KubernetesVersionCheckInterval = config.DefaultKubernetesVersionCheckInterval
	}
	cfg, err := sdkConfig(ctx, opts.Region, opts.Env)
	if err != nil {
		return nil, err
	}
	// an attempt that hangs fails after RequestTimeout and the SDK's retryer tries again; SQS long polls for 20s,
	// so its attempts get at least 30s
	cfg.HTTPClient = bodyReadOnlyClient{next: awshttp.NewBuildableClient().WithTimeout(opts.RequestTimeout)}
	sqsHTTP := bodyReadOnlyClient{next: awshttp.NewBuildableClient().WithTimeout(max(opts.RequestTimeout, 30*time.Second))}
	endpoint := func(service string) *string {
		if v := opts.Env("AWS_ENDPOINT_URL_" + service); v != "" {
			return aws.String(v)
		}
		if v := opts.Env("AWS_ENDPOINT_URL"); v != "" {
			return aws.String(v)
		}
		return nil
	}
	ec2Client := ec2.NewFromConfig(cfg, func(o *ec2.Options) { o.BaseEndpoint = endpoint("EC2") })
	ssmClient := ssm.NewFromConfig(cfg, func(o *ssm.Options) { o.BaseEndpoint = endpoint("SSM") })
	iamClient := iam.NewFromConfig(cfg, func(o *iam.Options) { o.BaseEndpoint = endpoint("IAM") })
	sqsClient := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint, o.HTTPClient = endpoint("SQS"), sqsHTTP })
	// The Price List API lives in a few regions of each partition (none in GovCloud); each serves every region's
	// prices of its partition, in the partition's currency.
	var pricingClient *pricing.Client
	if pricingRegion, ok := catalog.PricingAPIRegion(cfg.Region); ok {
		pricingClient = pricing.NewFromConfig(cfg, func(o *pricing.Options) {
			o.BaseEndpoint, o.Region = endpoint("PRICING"), pricingRegion
		})
	}
	if opts.Fallback == nil {
		if opts.Fallback, err = catalog.ForRegion(cfg.Region); err != nil {
			klog.FromContext(ctx).Error(err, "No embedded instance types and prices for the region", "region", cfg.Region)
		}
	}
	k8s := &kubernetesVersion{read: opts.KubernetesVersion, clock: opts.Clock}
	if _, err := k8s.refresh(ctx); err != nil { // FollowKubernetesVersion tries again
		klog.FromContext(ctx).Error(err, "Reading the API server's Kubernetes version failed; no EKS-optimized AMI resolves until it is read")
	}
	p := &Provider{
		opts: opts, ec2: ec2Client, sqs: sqsClient, k8sVersion: k8s,
		discovery: &discovery{ec2: ec2Client, ssm: ssmClient, profiles: newInstanceProfiles(iamClient, opts.ClusterName, cfg.Region), clusterName: opts.ClusterName, version: k8s.get,
			clock: opts.Clock, cache: map[string]cachedResolution{}},
		catalog: &catalogSource{ec2: ec2Client, pricing: pricingClient, region: cfg.Region, clock: opts.Clock, fallback: opts.Fallback,
			useFallback: opts.EmbeddedCatalog, partition: catalog.PartitionOf(cfg.Region), currency: catalog.CurrencyOf(cfg.Region)},
		unavailable:  cloud.NewUnavailableOfferings(opts.Clock),
		templates:    map[string]string{},
		templateUsed: map[string]time.Time{}, groupUsed: map[string]time.Time{},
	}
	if opts.FleetBatchWindow == 0 {
		opts.FleetBatchWindow = defaultFleetBatchWindow
	}
	p.fleets = newFleetBatcher(ec2Client, opts.FleetBatchWindow)
	p.terminator = newTerminateBatcher(ec2Client)
	return p, nil
}

// sdkConfig loads the SDK configuration: region from opts, else $AWS_REGION, else the SDK's shared configuration,
// else the instance metadata service (IMDS, as on an EKS node); credentials from env through lookup when given there
// (the sandbox), else the default chain.
func sdkConfig(ctx context.Context, region string, env func(string) string) (aws.Config, error) {
	var loaders []func(*awsconfig.LoadOptions) error
	if region == "" {
		region = env("AWS_REGION")
	}
	switch {
	case region != "":
		loaders = append(loaders, awsconfig.WithRegion(region))
	case env("AWS_EC2_METADATA_DISABLED") != "true":
		loaders = append(loaders, awsconfig.WithEC2IMDSRegion())
	}
	if id, secret := env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"); id != "" && secret != "" {
		loaders = append(loaders, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(id, secret, env("AWS_SESSION_TOKEN"))))
	}
	if env("AWS_EC2_METADATA_DISABLED") == "true" {
		loaders = append(loaders, awsconfig.WithEC2IMDSClientEnableState(1)) // imds.ClientDisabled
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, loaders...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, fmt.Errorf("no AWS region: set the region argument or AWS_REGION (the instance metadata service gave none)")
	}
	metrics.Register()
	cfg.APIOptions = append(cfg.APIOptions, addAPIMetrics)
	withInterruptedResponsesRetried(&cfg)
	return cfg, nil
}

// Region returns the AWS region Stevedore works in: region when set, else as sdkConfig finds it ($AWS_REGION, the
// SDK's shared configuration, the instance metadata service).
func Region(ctx context.Context, region string, env func(string) string) (string, error) {
	if region != "" {
		return region, nil
	}
	if env == nil {
		env = os.Getenv
	}
	cfg, err := sdkConfig(ctx, "", env)
	if err != nil {
		return "", err
	}
	return cfg.Region, nil
}

// FollowKubernetesVersion reads the API server's version every KubernetesVersionCheckInterval until ctx ends: after a
// control-plane upgrade, AMI aliases resolve to the new minor's images (new nodes launch with them, and nodes with
// the old ones drift).
func (p *Provider) FollowKubernetesVersion(ctx context.Context) {
	p.k8sVersion.run(ctx, p.opts.KubernetesVersionCheckInterval, func(string, string) { p.discovery.forget() })
}

// KubernetesVersion returns the Kubernetes minor version the AMIs are resolved for.
func (p *Provider) KubernetesVersion() (string, error) { return p.k8sVersion.get() }

// KubernetesVersionCondition says which version the AMIs are for and whether the last read succeeded (the
// EC2NodeClass condition KubernetesVersionReady).
func (p *Provider) KubernetesVersionCondition() (ok bool, reason, message string) {
	return p.k8sVersion.condition()
}

// SQS returns the SQS client (for the interruption poller).
func (p *Provider) SQS() *sqs.Client { return p.sqs }

// Catalog returns the current instance-type catalog.
func (p *Provider) Catalog(ctx context.Context) *catalog.File { return p.catalog.get(ctx) }

// CatalogError is why the last read of instance types and prices from AWS failed; nil when it succeeded.
func (p *Provider) CatalogError() error { return p.catalog.lastError() }

// CatalogCondition says whether the catalog in use was read from AWS by its last read, and if not what is used
// instead; known is false before the first read.
func (p *Provider) CatalogCondition() (known, ok bool, reason, message string) {
	return p.catalog.condition()
}

// UnavailableOfferings is the provider's ICE cache.
func (p *Provider) UnavailableOfferings() *cloud.UnavailableOfferings { return p.unavailable }

// MarkUnavailable records an offering without capacity.
func (p *Provider) MarkUnavailable(instanceType, zone, capacityType, _ string) {
	p.unavailable.Mark(instanceType, zone, capacityType)
}

func (p *Provider) nodeClass(ref *stevedorev1.NodeClassReference) (*stevedorev1.EC2NodeClass, error) {
	if ref == nil {
		return nil, fmt.Errorf("no nodeClassRef")
	}
	nc, err := p.opts.NodeClasses.Get(ref.Name)
	if apierrors.IsNotFound(err) {
		return nil, &cloud.NodeClassNotReadyError{Name: ref.Name, Reason: "EC2NodeClass not found"}
	}
	if err == nil && nc.DeletionTimestamp != nil {
		return nil, &cloud.NodeClassNotReadyError{Name: ref.Name, Reason: "EC2NodeClass is being deleted"}
	}
	return nc, err
}

// readyClass returns the node class a reference names with what it resolves to, or a NodeClassNotReadyError that
// lists its problems when it cannot launch.
func (p *Provider) readyClass(ctx context.Context, ref *stevedorev1.NodeClassReference) (*stevedorev1.EC2NodeClass, *Resolved, error) {
	nc, err := p.nodeClass(ref)
	if err != nil {
		return nil, nil, err
	}
	res, err := p.discovery.resolve(ctx, nc)
	if err != nil {
		return nil, nil, err
	}
	if len(res.Problems) > 0 {
		return nil, nil, &cloud.NodeClassNotReadyError{Name: nc.Name, Reason: strings.Join(res.Problems, "; ")}
	}
	return nc, res, nil
}

// Resolve returns what a node class resolves to (for its status).
func (p *Provider) Resolve(ctx context.Context, nc *stevedorev1.EC2NodeClass) (*Resolved, error) {
	return p.discovery.resolve(ctx, nc)
}

// InstanceTypes returns the types the NodePool's node class can launch: the catalog's types for which an AMI is
// resolved (their architecture's, and for GPU and Neuron types their variant's when the AMIs come from an alias), offered in the zones of its subnets, with allocatable computed from its kubelet settings.
func (p *Provider) InstanceTypes(ctx context.Context, np *stevedorev1.NodePool) ([]*cloud.InstanceType, error) {
	nc, res, err := p.readyClass(ctx, np.Spec.Template.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	its, err := p.copiedTypes(p.catalog.get(ctx), nc, res, nil)
	if err != nil {
		return nil, err
	}
	return p.withReservations(its, res.Reservations), nil
}

// withReservations adds the reserved offerings of the node class's reservations to its types (copies of their
// own, whose other offerings already carry this call's availability), each unavailable while the
// unavailable-offerings cache holds its reservation.
func (p *Provider) withReservations(its []*cloud.InstanceType, reservations []Reservation) []*cloud.InstanceType {
	if len(reservations) > 0 {
		addReservedOfferings(its, reservations, p.opts.Clock.Now(), p.unavailable)
	}
	return its
}

// copiedTypes returns copies, with their own offerings and this call's availability, of the node class's types
// (those named in only, when only is not nil: a launch needs the few its NodeClaim lists, not the catalog), for
// what the node class resolved to: the zones of its subnets (with their IDs) and its AMIs.
func (p *Provider) copiedTypes(cat *catalog.File, nc *stevedorev1.EC2NodeClass, res *Resolved, only map[string]bool) ([]*cloud.InstanceType, error) {
	zones, amis, zoneIDs := res.Zones(), res.AMIs, res.ZoneIDs()
	model := cloud.OverheadModel{VMMemoryPercent: p.opts.VMMemoryOverheadPercent, Kubelet: nc.Spec.Kubelet, RootVolume: rootVolumeSize(nc),
		InstanceStoreRAID0: ptr.Deref(nc.Spec.InstanceStorePolicy, "") == stevedorev1.InstanceStorePolicyRAID0}
	built, err := p.types.get(cat, model, zones, amis, func() ([]*cloud.InstanceType, error) {
		var out []*cloud.InstanceType
		for _, ct := range cat.InstanceTypes {
			if _, ok := ImageFor(amis, ct.Architecture, cloud.ImageVariant(ct)); !ok {
				continue
			}
			it, err := cloud.NewInstanceType(ct, model, zones)
			if err != nil {
				return nil, err
			}
			if len(it.Offerings) == 0 {
				continue
			}
			out = append(out, it)
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	// copies with their own offerings, whose availability is this call's
	out := make([]*cloud.InstanceType, 0, len(built))
	for _, it := range built {
		if only != nil && !only[it.Name] {
			continue
		}
		c := *it
		c.Offerings = slices.Clone(it.Offerings)
		c.SetZoneIDs(zoneIDs)
		out = append(out, &c)
	}
	p.unavailable.Apply(out)
	return out, nil
}

// typeCache keeps the instance types built from the current catalog for each overhead model, zones and
// architectures: building them (allocatable, labels and requirements of every type) on every launch and every
// provisioning batch was a sixth of the scheduler's CPU in a 1000-pod scale-out. A new catalog empties it.
type typeCache struct {
	mu      sync.Mutex
	catalog *catalog.File
	byKey   map[string][]*cloud.InstanceType
}

func (c *typeCache) get(cat *catalog.File, model cloud.OverheadModel, zones map[string]bool, amis map[string]AMI,
	build func() ([]*cloud.InstanceType, error)) ([]*cloud.InstanceType, error) {
	kubelet, err := json.Marshal(model.Kubelet)
	if err != nil {
		return nil, fmt.Errorf("kubelet configuration: %w", err)
	}
	zoneKey := "all zones" // nil zones: NewInstanceType keeps every offering
	if zones != nil {
		zoneKey = fmt.Sprint(slices.Sorted(maps.Keys(zones)))
	}
	key := fmt.Sprintf("%v|%s|%s|%t|%s|%v", model.VMMemoryPercent, kubelet, model.RootVolume.String(), model.InstanceStoreRAID0, zoneKey, slices.Sorted(maps.Keys(amis)))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.catalog != cat {
		c.catalog, c.byKey = cat, map[string][]*cloud.InstanceType{}
	}
	if its, ok := c.byKey[key]; ok {
		return its, nil
	}
	its, err := build()
	if err != nil {
		return nil, err
	}
	c.byKey[key] = its
	return its, nil
}

func rootVolumeSize(nc *stevedorev1.EC2NodeClass) resource.Quantity {
	for _, bd := range nc.Spec.BlockDeviceMappings {
		if bd.RootVolume && bd.EBS != nil && bd.EBS.VolumeSize != nil {
			return bd.EBS.VolumeSize.DeepCopy()
		}
	}
	return resource.MustParse("20Gi")
}

// Get returns an instance.
func (p *Provider) Get(ctx context.Context, instanceID string) (*cloud.Instance, error) {
	out, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{instanceID}})
	if isNotFound(err) {
		return nil, fmt.Errorf("%s: %w", instanceID, cloud.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("describing %s: %w", instanceID, err)
	}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			return p.instance(i), nil
		}
	}
	return nil, fmt.Errorf("%s: %w", instanceID, cloud.ErrNotFound)
}

// liveStates are the instance states of an instance not terminated.
func liveStates() []string {
	return []string{string(ec2types.InstanceStateNamePending), string(ec2types.InstanceStateNameRunning), string(ec2types.InstanceStateNameStopping),
		string(ec2types.InstanceStateNameStopped), string(ec2types.InstanceStateNameShuttingDown)}
}

// List returns the cluster's live instances launched by Stevedore.
func (p *Provider) List(ctx context.Context) ([]*cloud.Instance, error) {
	in := &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + OwnershipTag(p.opts.ClusterName)), Values: []string{ownedTagValue}},
		{Name: aws.String("tag-key"), Values: []string{TagNodePool}},
		{Name: aws.String("instance-state-name"), Values: liveStates()},
	}}
	var out []*cloud.Instance
	pg := ec2.NewDescribeInstancesPaginator(p.ec2, in)
	err := eachPage(ctx, "listing instances", pg, func(page *ec2.DescribeInstancesOutput) {
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				out = append(out, p.instance(i))
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (p *Provider) instance(i ec2types.Instance) *cloud.Instance {
	tags := map[string]string{}
	for _, t := range i.Tags {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	zone, zoneID := "", ""
	if i.Placement != nil {
		zone, zoneID = aws.ToString(i.Placement.AvailabilityZone), aws.ToString(i.Placement.AvailabilityZoneId)
	}
	if zoneID == "" {
		zoneID = p.discovery.zoneID(zone)
	}
	ct := stevedorev1.CapacityTypeOnDemand
	if i.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
		ct = stevedorev1.CapacityTypeSpot
	}
	reservation, reservationType := aws.ToString(i.CapacityReservationId), ""
	if reservation != "" {
		ct, reservationType = stevedorev1.CapacityTypeReserved, stevedorev1.ReservationTypeDefault
		if i.InstanceLifecycle == ec2types.InstanceLifecycleTypeCapacityBlock {
			reservationType = stevedorev1.ReservationTypeCapacityBlock
		}
	}
	state := ""
	if i.State != nil {
		state = string(i.State.Name)
	}
	inst := &cloud.Instance{
		ID: aws.ToString(i.InstanceId), ProviderID: fmt.Sprintf("aws:///%s/%s", zone, aws.ToString(i.InstanceId)),
		NodeName: aws.ToString(i.PrivateDnsName), Type: string(i.InstanceType), Zone: zone, CapacityType: ct,
		ImageID: aws.ToString(i.ImageId), State: state, LaunchTime: aws.ToTime(i.LaunchTime), Tags: tags,
		ZoneID: zoneID, CapacityReservationID: reservation, CapacityReservationType: reservationType,
		CapacityReservationInterruptible: p.discovery.interruptible(reservation),
	}
	inst.Price = p.price(inst.Type, zone, ct)
	if reservation != "" {
		inst.Price = p.price(inst.Type, zone, stevedorev1.CapacityTypeOnDemand) / reservedPriceDivisor
	}
	return inst
}

// price looks an offering's price up in the catalog (0 if unknown).
func (p *Provider) price(instanceType, zone, capacityType string) float64 {
	cat := p.catalog.get(context.Background())
	for _, it := range cat.InstanceTypes {
		if it.Name != instanceType {
			continue
		}
		for _, o := range it.Offerings {
			if o.Zone == zone && o.CapacityType == capacityType {
				return o.Price
			}
		}
	}
	return 0
}

// Delete terminates an instance this cluster owns. An instance without the cluster's ownership tag is refused;
// one already gone is not an error.
func (p *Provider) Delete(ctx context.Context, instanceID string) error {
	inst, err := p.Get(ctx, instanceID)
	if err != nil {
		if isNotFoundErr(err) {
			return nil
		}
		return err
	}
	if inst.Tags[OwnershipTag(p.opts.ClusterName)] != ownedTagValue {
		return fmt.Errorf("refusing to terminate %s: it lacks the tag %s=owned: %w", instanceID, OwnershipTag(p.opts.ClusterName), cloud.ErrNotOwned)
	}
	if inst.State == cloud.StateTerminated || inst.State == cloud.StateShuttingDown {
		return nil
	}
	return p.terminator.terminate(ctx, instanceID)
}

// Reboot restarts an instance this cluster owns (RebootInstances). An instance without the cluster's ownership
// tag is refused.
func (p *Provider) Reboot(ctx context.Context, instanceID string) error {
	inst, err := p.Get(ctx, instanceID)
	if err != nil {
		return err
	}
	if inst.Tags[OwnershipTag(p.opts.ClusterName)] != ownedTagValue {
		return fmt.Errorf("refusing to reboot %s: it lacks the tag %s=owned: %w", instanceID, OwnershipTag(p.opts.ClusterName), cloud.ErrNotOwned)
	}
	if _, err := p.ec2.RebootInstances(ctx, &ec2.RebootInstancesInput{InstanceIds: []string{instanceID}}); err != nil {
		return fmt.Errorf("RebootInstances %s: %w", instanceID, err)
	}
	return nil
}

func isNotFoundErr(err error) bool {
	return err != nil && (isNotFound(err) || errorsIs(err, cloud.ErrNotFound))
}

// IsDrifted reports why a NodeClaim's instance no longer matches its node class: a new AMI for its architecture,
// or a changed node class (its static fields hash differently).
func (p *Provider) IsDrifted(ctx context.Context, claim *stevedorev1.NodeClaim) (string, error) {
	nc, err := p.nodeClass(claim.Spec.NodeClassRef)
	if err != nil {
		return "", err
	}
	if h := claim.Annotations[stevedorev1.AnnotationNodeClassHash]; h != "" && h != NodeClassHash(nc) {
		return "NodeClassDrift", nil
	}
	res, err := p.discovery.resolve(ctx, nc)
	if err != nil {
		return "", err
	}
	if claim.Status.ImageID == "" || len(res.AMIs) == 0 {
		return "", nil
	}
	for _, ami := range res.AMIs {
		if ami.ID == claim.Status.ImageID {
			return "", nil
		}
	}
	return "AMIDrift", nil
}

// NodeClassHash hashes the fields of an EC2NodeClass that change what a launched instance is (not its selector
// terms, whose resolution is compared instead).
func NodeClassHash(nc *stevedorev1.EC2NodeClass) string {
	s := nc.Spec
	fields := []any{s.AMIFamily, s.Role, s.InstanceProfile, s.UserData, s.Tags, s.BlockDeviceMappings, s.MetadataOptions,
		s.Kubelet, s.AssociatePublicIPAddress, s.DetailedMonitoring}
	// fields added later count only when set: the hash of every node class that does not use them stays what it was
	if s.InstanceStorePolicy != nil {
		fields = append(fields, *s.InstanceStorePolicy)
	}
	if s.ConnectionTracking != nil {
		fields = append(fields, map[string]any{"connectionTracking": s.ConnectionTracking})
	}
	raw, _ := json.Marshal(fields)
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}
