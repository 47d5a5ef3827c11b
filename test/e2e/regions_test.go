/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/generated/clientset/versioned"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// TestEachPartitionLaunchesAtItsRegionsPrices: `scheduler sandbox --region` emulates AWS in eu-west-1, cn-north-1
// and us-gov-west-1 (the Price List API of the partition, none in GovCloud). In each, an EC2NodeClass naming its
// role by the partition's ARN launches a node for a pod: in the region's zones, at the region's on-demand price in
// its currency, with an instance profile whose ARN is the partition's; and `scheduler cost` on a dump of the
// cluster prices that node in the region.
func TestEachPartitionLaunchesAtItsRegionsPrices(t *testing.T) {
	scheduler := binary(t, "STEVEDORE_BIN", "./cmd/scheduler")
	kubectl := binary(t, "KUBECTL", "k8s.io/kubernetes/cmd/kubectl")
	for _, tc := range []struct{ region, partition, currency string }{
		{"eu-west-1", "aws", "USD"},
		{"cn-north-1", "aws-cn", "CNY"},
		{"us-gov-west-1", "aws-us-gov", "USD"},
	} {
		t.Run(tc.region, func(t *testing.T) {
			dir := t.TempDir()
			sb, kubeconfig, envFile := startSandbox(t, scheduler, dir, "--region", tc.region, "--with-scheduler=true", "--launch-delay", "500ms")
			defer func() {
				if err := sb.stop(t); err != nil {
					t.Errorf("stopping the sandbox: %v", err)
				}
			}()
			rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				t.Fatal(err)
			}
			kube, sd := kubernetes.NewForConfigOrDie(rc), versioned.NewForConfigOrDie(rc)
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()

			nc := harness.NewNodeClass()
			nc.Spec.Role = "arn:" + tc.partition + ":iam::111122223333:role/KarpenterNodeRole-my-cluster"
			if _, err := sd.StevedoreV1().EC2NodeClasses().Create(ctx, nc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			pool := "regional"
			np := harness.NewNodePool(pool, pool, harness.WithRequirements(harness.Req(stevedorev1.LabelCapacityType, "In", "on-demand")))
			if _, err := sd.StevedoreV1().NodePools().Create(ctx, np, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			pods, names := harness.Pods("default", pool, "web", 1, "500m", "512Mi")
			for _, p := range pods {
				if _, err := kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			var node *corev1.Node
			eventually(t, "the pod to be bound to a node of "+tc.region, func() error {
				p, err := kube.CoreV1().Pods("default").Get(ctx, names[0], metav1.GetOptions{})
				if err != nil {
					return err
				}
				if p.Spec.NodeName == "" {
					return errors.New("not bound yet")
				}
				node, err = kube.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
				return err
			})
			zone, typ := node.Labels[corev1.LabelTopologyZone], node.Labels[corev1.LabelInstanceTypeStable]
			if node.Labels[corev1.LabelTopologyRegion] != tc.region || !strings.HasPrefix(zone, tc.region) {
				t.Fatalf("node %s in region %q, zone %q; want %s", node.Name, node.Labels[corev1.LabelTopologyRegion], zone, tc.region)
			}

			cat, err := catalog.ForRegion(tc.region)
			if err != nil {
				t.Fatal(err)
			}
			want := cat.Pricer()(typ, zone, "on-demand")
			claims, err := sd.StevedoreV1().NodeClaims().List(ctx, metav1.ListOptions{})
			if err != nil || len(claims.Items) != 1 {
				t.Fatalf("%v NodeClaims (%v), want 1", len(claims.Items), err)
			}
			got, err := strconv.ParseFloat(claims.Items[0].Annotations[stevedorev1.AnnotationNodeClaimPrice], 64)
			if err != nil || want == 0 || got != want {
				t.Errorf("NodeClaim of %s in %s priced %v (%v), want %s's on-demand price %v %s", typ, zone, got, err, tc.region, want, tc.currency)
			}

			// the instance profile Stevedore made for the role, read back with the AWS SDK: the partition's ARN
			env := map[string]string{}
			for _, kv := range readEnvFile(t, envFile) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
			current, err := sd.StevedoreV1().EC2NodeClasses().Get(ctx, nc.Name, metav1.GetOptions{})
			if err != nil || current.Status.InstanceProfile == "" {
				t.Fatalf("EC2NodeClass status names no instance profile (%v)", err)
			}
			iamClient := iam.NewFromConfig(aws.Config{Region: tc.region,
				Credentials: credentials.NewStaticCredentialsProvider(env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], "")},
				func(o *iam.Options) { o.BaseEndpoint = aws.String(env["AWS_ENDPOINT_URL_IAM"]) })
			profile, err := iamClient.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(current.Status.InstanceProfile)})
			if err != nil {
				t.Fatal(err)
			}
			prefix := "arn:" + tc.partition + ":iam::"
			if arn := aws.ToString(profile.InstanceProfile.Arn); !strings.HasPrefix(arn, prefix) ||
				len(profile.InstanceProfile.Roles) != 1 || !strings.HasPrefix(aws.ToString(profile.InstanceProfile.Roles[0].Arn), prefix) {
				t.Errorf("instance profile %s holding %+v, want ARNs of partition %s", arn, profile.InstanceProfile.Roles, tc.partition)
			}

			// cost on a dump of the cluster, as docs/scheduling.md makes one: the region read from the nodes, the node
			// at its price in the region's currency
			dumped, err := run(t, nil, kubectl, "--kubeconfig", kubeconfig, "get", "nodes,pods,nodeclaims.stevedore.dev", "-A", "-o", "yaml")
			if err != nil {
				t.Fatalf("%v\n%s", err, dumped)
			}
			dump := filepath.Join(dir, "dump.yaml")
			if err := os.WriteFile(dump, []byte(dumped), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := run(t, nil, scheduler, "cost", "-f", dump, "-o", "json")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			for _, want := range []string{`"region": "` + tc.region + `"`, `"currency": "` + tc.currency + `"`, `"instanceType": "` + typ + `"`} {
				if !strings.Contains(out, want) {
					t.Errorf("cost on the dump lacks %s:\n%s", want, lastLines(out, 40))
				}
			}
		})
	}
}
