package aws

import (
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

func testBootstrap() Bootstrap {
	maxPods := int32(58)
	return Bootstrap{
		ClusterName: "prod", ClusterEndpoint: "https://ABC.gr7.us-east-1.eks.amazonaws.com", CABundle: []byte("-----BEGIN CERTIFICATE-----\nMIIB\n"),
		ServiceCIDR: "10.100.0.0/16",
		Labels:      map[string]string{stevedorev1.LabelNodePool: "arm64-spot", "team": "payments"},
		Taints: []corev1.Taint{{Key: stevedorev1.TaintUnregistered, Value: "true", Effect: corev1.TaintEffectNoSchedule},
			{Key: "workload-priority", Value: "critical", Effect: corev1.TaintEffectNoSchedule}},
		Kubelet: &stevedorev1.KubeletConfiguration{MaxPods: &maxPods, SystemReserved: map[string]string{"memory": "200Mi"}},
	}
}

// parts splits MIME multipart user data into its parts' content types and bodies.
func parts(t *testing.T, userData string) (types, bodies []string) {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(userData))
	if err != nil {
		t.Fatalf("user data is not a MIME document: %v", err)
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/mixed" {
		t.Fatalf("content type %q: %v", msg.Header.Get("Content-Type"), err)
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			return types, bodies
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		types = append(types, p.Header.Get("Content-Type"))
		bodies = append(bodies, string(b))
	}
}

func TestAL2023UserDataIsANodeadmNodeConfig(t *testing.T) {
	b := testBootstrap()
	b.UserData = "#!/bin/bash\necho hello\n"
	ud, err := b.AL2023()
	if err != nil {
		t.Fatal(err)
	}
	types, bodies := parts(t, ud)
	if len(types) != 2 || !strings.HasPrefix(types[0], "text/x-shellscript") || types[1] != "application/node.eks.aws" {
		t.Fatalf("parts %v, want the user's script then the NodeConfig", types)
	}
	var nc struct {
		APIVersion, Kind string
		Spec             struct {
			Cluster struct{ Name, APIServerEndpoint, CertificateAuthority, CIDR string }
			Kubelet struct {
				Config map[string]any
				Flags  []string
			}
		}
	}
	if err := yaml.Unmarshal([]byte(bodies[1]), &nc); err != nil {
		t.Fatal(err)
	}
	if nc.Kind != "NodeConfig" || nc.Spec.Cluster.Name != "prod" || nc.Spec.Cluster.APIServerEndpoint != b.ClusterEndpoint ||
		nc.Spec.Cluster.CIDR != "10.100.0.0/16" || nc.Spec.Cluster.CertificateAuthority == "" {
		t.Fatalf("NodeConfig %+v", nc)
	}
	if nc.Spec.Kubelet.Config["maxPods"] != float64(58) {
		t.Errorf("kubelet config %v, want maxPods 58", nc.Spec.Kubelet.Config)
	}
	flags := strings.Join(nc.Spec.Kubelet.Flags, " ")
	for _, want := range []string{"--node-labels=stevedore.dev/nodepool=arm64-spot,team=payments",
		"--register-with-taints=stevedore.dev/unregistered=true:NoSchedule,workload-priority=critical:NoSchedule"} {
		if !strings.Contains(flags, want) {
			t.Errorf("flags %q lack %q", flags, want)
		}
	}
}

func TestBottlerocketUserDataMergesTheUsersTOMLUnderStevedoresSettings(t *testing.T) {
	b := testBootstrap()
	b.UserData = "[settings.kubernetes]\ncluster-name = \"wrong\"\nimage-gc-high-threshold-percent = 85\n[settings.host-containers.admin]\nenabled = true\n"
	ud, err := b.Bottlerocket()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Settings struct {
			Kubernetes map[string]any `toml:"kubernetes"`
			Host       map[string]any `toml:"host-containers"`
		} `toml:"settings"`
	}
	if _, err := toml.Decode(ud, &doc); err != nil {
		t.Fatalf("%v\n%s", err, ud)
	}
	k := doc.Settings.Kubernetes
	if k["cluster-name"] != "prod" || k["api-server"] != b.ClusterEndpoint || k["max-pods"] != int64(58) {
		t.Fatalf("kubernetes settings %v", k)
	}
	if k["image-gc-high-threshold-percent"] != int64(85) || doc.Settings.Host["admin"] == nil {
		t.Errorf("the user's own settings were lost: %v / %v", k, doc.Settings.Host)
	}
	labels, _ := k["node-labels"].(map[string]any)
	taints, _ := k["node-taints"].(map[string]any)
	if labels[stevedorev1.LabelNodePool] != "arm64-spot" || taints[stevedorev1.TaintUnregistered] == nil {
		t.Errorf("labels %v taints %v", labels, taints)
	}
	b.UserData = "not = [toml"
	if _, err := b.Bottlerocket(); err == nil {
		t.Error("invalid TOML user data must be an error")
	}
}

func TestKubeletLabelsLeaveOutWellKnownAndRestrictedKeys(t *testing.T) {
	got := kubeletLabels(map[string]string{
		stevedorev1.LabelNodePool: "p", "team": "a", stevedorev1.LabelCapacityType: "spot",
		corev1.LabelTopologyZone: "us-east-1a", "node-role.kubernetes.io/worker": "", stevedorev1.LabelNodeClaim: "nc",
	})
	if len(got) != 2 || got[stevedorev1.LabelNodePool] != "p" || got["team"] != "a" {
		t.Fatalf("kubelet labels %v", got)
	}
}
