/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/mail"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// InstanceStoreRAID0 stripes the NVMe instance-store volumes into the node's ephemeral storage.
	InstanceStoreRAID0 bool
}

// mimeBoundary separates the MIME parts of AL2023 user data.
const mimeBoundary = "//"

// AL2023 renders nodeadm user data: a MIME multipart document whose NodeConfig part carries the cluster, the
// kubelet configuration and the kubelet flags --node-labels and --register-with-taints. The EC2NodeClass's user
// data, if any, comes first as its own part (a shell script or another NodeConfig, which nodeadm merges).
func (b Bootstrap) AL2023() (string, error) {
	kubelet := nodeadmKubelet(b.Kubelet)
	spec := map[string]any{
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
	}
	if b.InstanceStoreRAID0 {
		spec["instance"] = map[string]any{"localStorage": map[string]any{"strategy": "RAID0"}}
	}
	nodeConfig := map[string]any{"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}
	doc, err := yaml.Marshal(nodeConfig)
	if err != nil {
		return "", err
	}
	parts, err := userDataParts(b.UserData)
	if err != nil {
		return "", err
	}
	boundary := mimeBoundary
	for i := 0; partsContain(parts, "--"+boundary); i++ {
		boundary = fmt.Sprintf("%s%d", mimeBoundary, i)
	}
	var out strings.Builder
	out.WriteString("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"" + boundary + "\"\n\n")
	for _, p := range parts {
		out.WriteString("--" + boundary + "\n")
		for _, h := range p.headers {
			out.WriteString(h + "\n")
		}
		out.WriteString("\n" + strings.TrimRight(p.body, "\n") + "\n\n")
	}
	out.WriteString("--" + boundary + "\nContent-Type: application/node.eks.aws\n\n---\n")
	out.Write(doc)
	out.WriteString("\n--" + boundary + "--\n")
	return out.String(), nil
}

// nodeadmKubelet is nodeadm's kubelet configuration for the EC2NodeClass's kubelet settings (nil: none).
func nodeadmKubelet(k *stevedorev1.KubeletConfiguration) map[string]any {
	kubelet := map[string]any{}
	if k == nil {
		return kubelet
	}
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
	if len(k.EvictionSoft) > 0 {
		kubelet["evictionSoft"] = k.EvictionSoft
	}
	if len(k.EvictionSoftGracePeriod) > 0 {
		kubelet["evictionSoftGracePeriod"] = gracePeriods(k.EvictionSoftGracePeriod)
	}
	if k.EvictionMaxPodGracePeriod != nil {
		kubelet["evictionMaxPodGracePeriod"] = *k.EvictionMaxPodGracePeriod
	}
	if k.ImageGCHighThresholdPercent != nil {
		kubelet["imageGCHighThresholdPercent"] = *k.ImageGCHighThresholdPercent
	}
	if k.ImageGCLowThresholdPercent != nil {
		kubelet["imageGCLowThresholdPercent"] = *k.ImageGCLowThresholdPercent
	}
	if k.CPUCFSQuota != nil {
		kubelet["cpuCFSQuota"] = *k.CPUCFSQuota
	}
	return kubelet
}

// userDataPart is one part of AL2023 user data: its MIME headers ("Content-Type: ...") and body.
type userDataPart struct {
	headers []string
	body    string
}

// userDataParts splits an EC2NodeClass's AL2023 user data into MIME parts: a MIME multipart document gives its
// parts as they are (each keeps its headers), a shell script or a NodeConfig is one part of its own type.
func userDataParts(userData string) ([]userDataPart, error) {
	if strings.TrimSpace(userData) == "" {
		return nil, nil
	}
	msg, err := mail.ReadMessage(strings.NewReader(strings.TrimLeft(userData, "\n")))
	if err == nil && msg.Header.Get("Content-Type") != "" {
		mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
		if err != nil {
			return nil, fmt.Errorf("EC2NodeClass userData: MIME Content-Type: %w", err)
		}
		if !strings.HasPrefix(mediaType, "multipart/") || params["boundary"] == "" {
			return nil, fmt.Errorf("EC2NodeClass userData: a MIME document must be multipart with a boundary, not %s", mediaType)
		}
		var out []userDataPart
		r := multipart.NewReader(msg.Body, params["boundary"])
		for {
			part, err := r.NextRawPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("EC2NodeClass userData: MIME part %d: %w", len(out)+1, err)
			}
			body, err := io.ReadAll(part)
			if err != nil {
				return nil, fmt.Errorf("EC2NodeClass userData: MIME part %d: %w", len(out)+1, err)
			}
			var headers []string
			for _, k := range slices.Sorted(maps.Keys(part.Header)) {
				for _, v := range part.Header[k] {
					headers = append(headers, k+": "+v)
				}
			}
			out = append(out, userDataPart{headers: headers, body: string(body)})
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("EC2NodeClass userData: the MIME document has no part")
		}
		return out, nil
	}
	if strings.HasPrefix(strings.TrimSpace(userData), "#!") {
		return []userDataPart{{headers: []string{`Content-Type: text/x-shellscript; charset="us-ascii"`}, body: userData}}, nil
	}
	return []userDataPart{{headers: []string{"Content-Type: application/node.eks.aws"}, body: userData}}, nil
}

// gracePeriods renders durations as the kubelet reads them ("1m30s").
func gracePeriods(in map[string]metav1.Duration) map[string]string {
	out := make(map[string]string, len(in))
	for k, d := range in {
		out[k] = d.Duration.String()
	}
	return out
}

func partsContain(parts []userDataPart, s string) bool {
	for _, p := range parts {
		if strings.Contains(p.body, s) {
			return true
		}
	}
	return false
}

// bottlerocketKubelet sets Bottlerocket's kubernetes settings for the EC2NodeClass's kubelet settings (nil: none).
func bottlerocketKubelet(k8s map[string]any, k *stevedorev1.KubeletConfiguration) {
	if k == nil {
		return
	}
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
	if len(k.EvictionSoft) > 0 {
		k8s["eviction-soft"] = toAnyMap(k.EvictionSoft)
	}
	if len(k.EvictionSoftGracePeriod) > 0 {
		k8s["eviction-soft-grace-period"] = toAnyMap(gracePeriods(k.EvictionSoftGracePeriod))
	}
	if k.EvictionMaxPodGracePeriod != nil {
		k8s["eviction-max-pod-grace-period"] = int64(*k.EvictionMaxPodGracePeriod)
	}
	// Bottlerocket takes the image GC thresholds as strings
	if k.ImageGCHighThresholdPercent != nil {
		k8s["image-gc-high-threshold-percent"] = strconv.Itoa(int(*k.ImageGCHighThresholdPercent))
	}
	if k.ImageGCLowThresholdPercent != nil {
		k8s["image-gc-low-threshold-percent"] = strconv.Itoa(int(*k.ImageGCLowThresholdPercent))
	}
	if k.CPUCFSQuota != nil {
		k8s["cpu-cfs-quota-enforced"] = *k.CPUCFSQuota
	}
	if len(k.ClusterDNS) > 0 {
		k8s["cluster-dns-ip"] = k.ClusterDNS
	}
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
	bottlerocketKubelet(k8s, b.Kubelet)
	root["kubernetes"] = k8s
	if b.InstanceStoreRAID0 {
		// Bottlerocket's own RAID0 of the instance store, bound over the directories that hold ephemeral data,
		// before the kubelet starts
		commands, _ := root["bootstrap-commands"].(map[string]any)
		if commands == nil {
			commands = map[string]any{}
		}
		commands["000-stevedore-instance-store"] = map[string]any{
			"commands": [][]string{{"apiclient", "ephemeral-storage", "init"},
				{"apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"}},
			"mode": "always", "essential": true,
		}
		root["bootstrap-commands"] = commands
	}
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
