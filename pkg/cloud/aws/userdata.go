package aws

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// Bootstrap is what a node needs to join the cluster, rendered into user data per AMI family.
type Bootstrap struct {
	ClusterName     string
	ClusterEndpoint string
	// CABundle is the cluster CA certificate (PEM).
	CABundle    []byte
	ServiceCIDR string
	Labels      map[string]string
	Taints      []corev1.Taint
	Kubelet     *stevedorev1.KubeletConfiguration
	// UserData is the EC2NodeClass's own user data, merged as each family allows.
	UserData string
}

// mimeBoundary separates the MIME parts of AL2023 user data.
const mimeBoundary = "//"

// AL2023 renders nodeadm user data: a MIME multipart document whose NodeConfig part carries the cluster, the
// kubelet configuration and the kubelet flags --node-labels and --register-with-taints. The EC2NodeClass's user
// data, if any, comes first as its own part (a shell script or another NodeConfig, which nodeadm merges).
func (b Bootstrap) AL2023() (string, error) {
	kubelet := map[string]any{}
	if k := b.Kubelet; k != nil {
		if k.MaxPods != nil {
			kubelet["maxPods"] = *k.MaxPods
		}
		if k.PodsPerCore != nil {
			kubelet["podsPerCore"] = *k.PodsPerCore
		}
		if len(k.KubeReserved) > 0 {
			kubelet["kubeReserved"] = k.KubeReserved
		}
		if len(k.SystemReserved) > 0 {
			kubelet["systemReserved"] = k.SystemReserved
		}
		if len(k.EvictionHard) > 0 {
			kubelet["evictionHard"] = k.EvictionHard
		}
		if len(k.ClusterDNS) > 0 {
			kubelet["clusterDNS"] = k.ClusterDNS
		}
	}
	nodeConfig := map[string]any{
		"apiVersion": "node.eks.aws/v1alpha1",
		"kind":       "NodeConfig",
		"spec": map[string]any{
			"cluster": map[string]any{
				"name":                 b.ClusterName,
				"apiServerEndpoint":    b.ClusterEndpoint,
				"certificateAuthority": base64.StdEncoding.EncodeToString(b.CABundle),
				"cidr":                 b.ServiceCIDR,
			},
			"kubelet": map[string]any{
				"config": kubelet,
				"flags":  []string{"--node-labels=" + labelFlag(b.Labels), "--register-with-taints=" + taintFlag(b.Taints)},
			},
		},
	}
	doc, err := yaml.Marshal(nodeConfig)
	if err != nil {
		return "", err
	}
	var out strings.Builder
	out.WriteString("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"" + mimeBoundary + "\"\n\n")
	if strings.TrimSpace(b.UserData) != "" {
		out.WriteString("--" + mimeBoundary + "\n")
		if strings.HasPrefix(strings.TrimSpace(b.UserData), "#!") {
			out.WriteString("Content-Type: text/x-shellscript; charset=\"us-ascii\"\n\n")
		} else {
			out.WriteString("Content-Type: application/node.eks.aws\n\n")
		}
		out.WriteString(strings.TrimRight(b.UserData, "\n") + "\n\n")
	}
	out.WriteString("--" + mimeBoundary + "\nContent-Type: application/node.eks.aws\n\n---\n")
	out.Write(doc)
	out.WriteString("\n--" + mimeBoundary + "--\n")
	return out.String(), nil
}

// Bottlerocket renders Bottlerocket's TOML settings. The EC2NodeClass's user data is parsed as TOML and Stevedore's
// settings are merged over it (the cluster settings, labels and taints are Stevedore's to set).
func (b Bootstrap) Bottlerocket() (string, error) {
	settings := map[string]any{}
	if strings.TrimSpace(b.UserData) != "" {
		if _, err := toml.Decode(b.UserData, &settings); err != nil {
			return "", fmt.Errorf("EC2NodeClass userData is not valid Bottlerocket TOML: %w", err)
		}
	}
	root, _ := settings["settings"].(map[string]any)
	if root == nil {
		root = map[string]any{}
	}
	k8s, _ := root["kubernetes"].(map[string]any)
	if k8s == nil {
		k8s = map[string]any{}
	}
	k8s["cluster-name"] = b.ClusterName
	k8s["api-server"] = b.ClusterEndpoint
	k8s["cluster-certificate"] = base64.StdEncoding.EncodeToString(b.CABundle)
	labels := map[string]any{}
	for k, v := range b.Labels {
		labels[k] = v
	}
	k8s["node-labels"] = labels
	taints := map[string]any{}
	for _, t := range b.Taints {
		existing, _ := taints[t.Key].([]string)
		taints[t.Key] = append(existing, fmt.Sprintf("%s:%s", t.Value, t.Effect))
	}
	k8s["node-taints"] = taints
	if k := b.Kubelet; k != nil {
		if k.MaxPods != nil {
			k8s["max-pods"] = *k.MaxPods
		}
		if len(k.KubeReserved) > 0 {
			k8s["kube-reserved"] = toAnyMap(k.KubeReserved)
		}
		if len(k.SystemReserved) > 0 {
			k8s["system-reserved"] = toAnyMap(k.SystemReserved)
		}
		if len(k.EvictionHard) > 0 {
			k8s["eviction-hard"] = toAnyMap(k.EvictionHard)
		}
		if len(k.ClusterDNS) > 0 {
			k8s["cluster-dns-ip"] = k.ClusterDNS
		}
	}
	root["kubernetes"] = k8s
	settings["settings"] = root
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(settings); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// Render picks the format of the AMI family; Custom passes the EC2NodeClass's user data through unchanged.
func (b Bootstrap) Render(amiFamily string) (string, error) {
	switch amiFamily {
	case stevedorev1.AMIFamilyBottlerocket:
		return b.Bottlerocket()
	case stevedorev1.AMIFamilyCustom:
		return b.UserData, nil
	default:
		return b.AL2023()
	}
}

func toAnyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func labelFlag(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

func taintFlag(taints []corev1.Taint) string {
	parts := make([]string, 0, len(taints))
	for _, t := range taints {
		if t.Value == "" {
			parts = append(parts, fmt.Sprintf("%s:%s", t.Key, t.Effect))
		} else {
			parts = append(parts, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
		}
	}
	return strings.Join(parts, ",")
}
