/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// TestAL2023UserDataKeepsEachPartOfTheUsersOwn: the EC2NodeClass's user data comes first, part by part: a script
// or a NodeConfig as one part of its type, a MIME multipart document (as Karpenter users write it, boundary "//"
// included) as its own parts with their headers, never wrapped whole inside another part.
func TestAL2023UserDataKeepsEachPartOfTheUsersOwn(t *testing.T) {
	mimeDoc := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n" +
		"--//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho one\n\n" +
		"--//\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      shutdownGracePeriod: 30s\n\n" +
		"--//--\n"
	tests := []struct {
		name      string
		userData  string
		wantTypes []string
		wantIn    []string // in the user's parts, in order
	}{
		{name: "none", wantTypes: []string{"application/node.eks.aws"}},
		{name: "a script", userData: "#!/bin/bash\necho hello\n", wantTypes: []string{`text/x-shellscript; charset="us-ascii"`, "application/node.eks.aws"},
			wantIn: []string{"echo hello"}},
		{name: "a NodeConfig", userData: "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags: [--v=2]\n",
			wantTypes: []string{"application/node.eks.aws", "application/node.eks.aws"}, wantIn: []string{"--v=2"}},
		{name: "a MIME document", userData: mimeDoc,
			wantTypes: []string{`text/x-shellscript; charset="us-ascii"`, "application/node.eks.aws", "application/node.eks.aws"},
			wantIn:    []string{"echo one", "shutdownGracePeriod: 30s"}},
		{name: "a script that prints the boundary", userData: "#!/bin/bash\necho '\n--//'\n",
			wantTypes: []string{`text/x-shellscript; charset="us-ascii"`, "application/node.eks.aws"}, wantIn: []string{"--//"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := testBootstrap()
			b.UserData = tc.userData
			ud, err := b.AL2023()
			if err != nil {
				t.Fatal(err)
			}
			types, bodies := parts(t, ud)
			if strings.Join(types, "|") != strings.Join(tc.wantTypes, "|") {
				t.Fatalf("parts %q, want %q", types, tc.wantTypes)
			}
			for i, want := range tc.wantIn {
				if !strings.Contains(bodies[i], want) || strings.Contains(bodies[i], "MIME-Version") {
					t.Errorf("part %d is %q, want it to hold %q (and no MIME document inside)", i, bodies[i], want)
				}
			}
			if !strings.Contains(bodies[len(bodies)-1], "kind: NodeConfig") || !strings.Contains(bodies[len(bodies)-1], "apiServerEndpoint") {
				t.Errorf("the last part is not Stevedore's NodeConfig: %q", bodies[len(bodies)-1])
			}
		})
	}
	b := testBootstrap()
	b.UserData = "MIME-Version: 1.0\nContent-Type: text/plain\n\nhello\n"
	if _, err := b.AL2023(); err == nil || !strings.Contains(err.Error(), "multipart") {
		t.Errorf("a MIME document that is not multipart: %v, want an error saying so", err)
	}
}

// TestKarpentersKubeletFieldsReachBothFamilies: soft eviction, image GC thresholds and CFS quota, as Karpenter's
// EC2NodeClass carries them, are in the nodeadm kubelet config and in Bottlerocket's settings.
func TestKarpentersKubeletFieldsReachBothFamilies(t *testing.T) {
	b := testBootstrap()
	high, low, grace, quota := int32(85), int32(80), int32(60), false
	b.Kubelet.EvictionSoft = map[string]string{"memory.available": "500Mi"}
	b.Kubelet.EvictionSoftGracePeriod = map[string]metav1.Duration{"memory.available": {Duration: 90 * time.Second}}
	b.Kubelet.EvictionMaxPodGracePeriod = &grace
	b.Kubelet.ImageGCHighThresholdPercent, b.Kubelet.ImageGCLowThresholdPercent = &high, &low
	b.Kubelet.CPUCFSQuota = &quota
	ud, err := b.AL2023()
	if err != nil {
		t.Fatal(err)
	}
	_, bodies := parts(t, ud)
	for _, want := range []string{"evictionSoft:\n        memory.available: 500Mi", "evictionSoftGracePeriod:\n        memory.available: 1m30s",
		"evictionMaxPodGracePeriod: 60", "imageGCHighThresholdPercent: 85", "imageGCLowThresholdPercent: 80", "cpuCFSQuota: false"} {
		if !strings.Contains(bodies[len(bodies)-1], want) {
			t.Errorf("the NodeConfig lacks %q:\n%s", want, bodies[len(bodies)-1])
		}
	}
	br, err := b.Bottlerocket()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`[settings.kubernetes.eviction-soft]`, `"memory.available" = "500Mi"`, `[settings.kubernetes.eviction-soft-grace-period]`,
		`"memory.available" = "1m30s"`, `eviction-max-pod-grace-period = 60`, `image-gc-high-threshold-percent = "85"`,
		`image-gc-low-threshold-percent = "80"`, `cpu-cfs-quota-enforced = false`} {
		if !strings.Contains(br, want) {
			t.Errorf("the Bottlerocket settings lack %q:\n%s", want, br)
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

// TestInstanceStoreRAID0ReachesBothFamilies: instanceStorePolicy RAID0 is nodeadm's localStorage strategy on
// AL2023 and Bottlerocket's ephemeral-storage bootstrap command (init, then bind the ephemeral directories); unset,
// neither appears.
func TestInstanceStoreRAID0ReachesBothFamilies(t *testing.T) {
	for _, raid := range []bool{false, true} {
		b := testBootstrap()
		b.InstanceStoreRAID0 = raid
		ud, err := b.AL2023()
		if err != nil {
			t.Fatal(err)
		}
		_, bodies := parts(t, ud)
		var nc struct {
			Spec struct {
				Instance struct {
					LocalStorage struct{ Strategy string } `json:"localStorage"`
				}
			}
		}
		if err := yaml.Unmarshal([]byte(bodies[len(bodies)-1]), &nc); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{true: "RAID0"}[raid]; nc.Spec.Instance.LocalStorage.Strategy != want {
			t.Errorf("RAID0 %t: nodeadm localStorage strategy %q, want %q", raid, nc.Spec.Instance.LocalStorage.Strategy, want)
		}
		br, err := b.Bottlerocket()
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Settings struct {
				Bootstrap map[string]struct {
					Commands  [][]string `toml:"commands"`
					Mode      string     `toml:"mode"`
					Essential bool       `toml:"essential"`
				} `toml:"bootstrap-commands"`
			} `toml:"settings"`
		}
		if _, err := toml.Decode(br, &doc); err != nil {
			t.Fatalf("%v\n%s", err, br)
		}
		cmd, ok := doc.Settings.Bootstrap["000-stevedore-instance-store"]
		if ok != raid {
			t.Fatalf("RAID0 %t: Bottlerocket bootstrap commands %v", raid, doc.Settings.Bootstrap)
		}
		if raid && (len(cmd.Commands) != 2 || strings.Join(cmd.Commands[0], " ") != "apiclient ephemeral-storage init" ||
			!strings.Contains(strings.Join(cmd.Commands[1], " "), "ephemeral-storage bind --dirs /var/lib/containerd /var/lib/kubelet /var/log/pods") ||
			cmd.Mode != "always" || !cmd.Essential) {
			t.Errorf("Bottlerocket bootstrap command %+v", cmd)
		}
	}
}
