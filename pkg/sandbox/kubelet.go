/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net/mail"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/catalog"
	"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu"
)

// emulatedVMMemoryPercent is the share of nominal memory an emulated instance does not report, a little less
// than Stevedore's 7.5% planning default, as real instances do.
const emulatedVMMemoryPercent = 5.0

// kubeletConfig is what a node's bootstrap configuration tells its kubelet.
type kubeletConfig struct {
	labels         map[string]string
	taints         []corev1.Taint
	maxPods        int64
	kubeReserved   map[string]string
	systemReserved map[string]string
	evictionHard   map[string]string
}

// addDevices adds what the NVIDIA, Neuron and EFA device plugins advertise to a node's capacity: the type's GPUs
// and Neuron devices, and the EFA interfaces attached at launch (not those the type could take).
func addDevices(capacity corev1.ResourceList, inst *awsemu.Instance, it catalog.InstanceType) {
	for name, q := range cloud.AcceleratorCapacity(it) {
		if name != stevedorev1.ResourceEFA {
			capacity[name] = q
		}
	}
	if efa := efaInterfaces(inst); efa > 0 {
		capacity[stevedorev1.ResourceEFA] = *resource.NewQuantity(int64(efa), resource.DecimalSI)
	}
}

// efaInterfaces counts the EFA interfaces the instance was launched with.
func efaInterfaces(inst *awsemu.Instance) int {
	n := 0
	for _, ni := range inst.LaunchTemplate.NetworkInterfaces {
		if ni.InterfaceType == "efa" {
			n++
		}
	}
	return n
}

// nodeForInstance builds the Node a kubelet on the instance registers, as the EKS AMIs do: the bootstrap user data
// (nodeadm NodeConfig in MIME multipart, or Bottlerocket TOML) gives labels, taints and kubelet settings; the
// instance type gives capacity; the cloud controller manager's labels (instance type, zone, region) and provider ID
// are added as on EKS.
func nodeForInstance(inst *awsemu.Instance, it catalog.InstanceType, region string) (*corev1.Node, error) {
	cfg, err := parseUserData(inst.LaunchTemplate.UserData)
	if err != nil {
		return nil, fmt.Errorf("instance %s: %w", inst.ID, err)
	}
	if cfg.maxPods == 0 {
		cfg.maxPods = int64(it.PodLimit())
	}
	memMiB := int64(math.Floor(float64(it.MemoryMiB) * (1 - emulatedVMMemoryPercent/100)))
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(it.VCPU), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(memMiB*1024*1024, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(cfg.maxPods, resource.DecimalSI),
		corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
	}
	addDevices(capacity, inst, it)
	if bd := inst.LaunchTemplate.BlockDevices; len(bd) > 0 && bd[0].VolumeSize > 0 {
		capacity[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(bd[0].VolumeSize)<<30, resource.BinarySI)
	}
	reserved := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(cloud.KubeReservedCPU(it.VCPU), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(cloud.KubeReservedMemoryMiB(cfg.maxPods)*1024*1024, resource.BinarySI),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
	}
	for k, v := range cfg.kubeReserved {
		reserved[corev1.ResourceName(k)] = resource.MustParse(v)
	}
	for k, v := range cfg.systemReserved {
		q := resource.MustParse(v)
		if cur, ok := reserved[corev1.ResourceName(k)]; ok {
			q.Add(cur)
		}
		reserved[corev1.ResourceName(k)] = q
	}
	eviction := resource.MustParse("100Mi")
	if v, ok := cfg.evictionHard["memory.available"]; ok {
		eviction = resource.MustParse(v)
	}
	allocatable := corev1.ResourceList{}
	for name, q := range capacity {
		v := q.DeepCopy()
		if r, ok := reserved[name]; ok {
			v.Sub(r)
		}
		if name == corev1.ResourceMemory {
			v.Sub(eviction)
		}
		allocatable[name] = v
	}
	labels := map[string]string{}
	for k, v := range cfg.labels {
		labels[k] = v
	}
	for k, v := range map[string]string{
		corev1.LabelHostname: inst.PrivateDNSName, corev1.LabelOSStable: "linux", corev1.LabelArchStable: inst.Architecture,
		corev1.LabelInstanceTypeStable: inst.Type, corev1.LabelTopologyZone: inst.Zone, corev1.LabelTopologyRegion: region,
	} {
		labels[k] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        inst.PrivateDNSName,
			Labels:      labels,
			Annotations: map[string]string{KwokNodeAnnotation: KwokNodeValue},
		},
		Spec:   corev1.NodeSpec{ProviderID: inst.ProviderID(), Taints: cfg.taints},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: allocatable},
	}, nil
}

// parseUserData reads the kubelet settings a node would boot with.
func parseUserData(ud string) (kubeletConfig, error) {
	cfg := kubeletConfig{labels: map[string]string{}}
	trimmed := strings.TrimSpace(ud)
	switch {
	case strings.HasPrefix(trimmed, "MIME-Version"):
		return cfg, parseNodeadm(ud, &cfg)
	case strings.HasPrefix(trimmed, "[settings"):
		return cfg, parseBottlerocket(ud, &cfg)
	case trimmed == "":
		return cfg, fmt.Errorf("no user data: the node would not know its cluster")
	default:
		return cfg, fmt.Errorf("user data is neither nodeadm MIME nor Bottlerocket TOML")
	}
}

func parseNodeadm(ud string, cfg *kubeletConfig) error {
	msg, err := mail.ReadMessage(strings.NewReader(ud))
	if err != nil {
		return fmt.Errorf("user data MIME: %w", err)
	}
	_, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		return fmt.Errorf("user data MIME: %w", err)
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	// nodeadm merges every NodeConfig part of the user data; a part may hold some fields only (the user's own
	// part, merged with Stevedore's)
	var cluster, endpoint string
	for {
		p, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("user data MIME part: %w", err)
		}
		body, _ := io.ReadAll(p)
		switch {
		case strings.HasPrefix(p.Header.Get("Content-Type"), "text/x-shellscript"):
			// a custom image's own join script, as the AL2 family's bootstrap.sh takes it
			if name, ok := cfg.applyBootstrapScript(string(body)); ok {
				cluster, endpoint = name, "from the script"
			}
			continue
		case p.Header.Get("Content-Type") != "application/node.eks.aws":
			continue
		}
		name, server, err := cfg.applyNodeConfig(body)
		if err != nil {
			return err
		}
		cluster, endpoint = cmp.Or(name, cluster), cmp.Or(server, endpoint)
	}
	switch {
	case cluster == "" && endpoint == "":
		return fmt.Errorf("no NodeConfig in the user data")
	case cluster == "" || endpoint == "":
		return fmt.Errorf("NodeConfig lacks the cluster name or API server endpoint")
	}
	return nil
}

// applyNodeConfig applies the kubelet settings of one NodeConfig part, and returns the cluster's name and API
// server endpoint it gives ("" for those it leaves to another part, or when the part is not a NodeConfig).
func (cfg *kubeletConfig) applyNodeConfig(body []byte) (cluster, endpoint string, err error) {
	var nc struct {
		Kind string
		Spec struct {
			Cluster struct{ Name, APIServerEndpoint string }
			Kubelet struct {
				Config struct {
					MaxPods        int64             `json:"maxPods"`
					KubeReserved   map[string]string `json:"kubeReserved"`
					SystemReserved map[string]string `json:"systemReserved"`
					EvictionHard   map[string]string `json:"evictionHard"`
				}
				Flags []string
			}
		}
	}
	if err := yaml.Unmarshal(bytes.TrimPrefix(bytes.TrimSpace(body), []byte("---")), &nc); err != nil {
		return "", "", fmt.Errorf("NodeConfig: %w", err)
	}
	if nc.Kind != "NodeConfig" {
		return "", "", nil
	}
	k := nc.Spec.Kubelet.Config
	if k.MaxPods > 0 {
		cfg.maxPods = k.MaxPods
	}
	if k.KubeReserved != nil {
		cfg.kubeReserved = k.KubeReserved
	}
	if k.SystemReserved != nil {
		cfg.systemReserved = k.SystemReserved
	}
	if k.EvictionHard != nil {
		cfg.evictionHard = k.EvictionHard
	}
	cfg.applyFlags(nc.Spec.Kubelet.Flags)
	return nc.Spec.Cluster.Name, nc.Spec.Cluster.APIServerEndpoint, nil
}

// bootstrapScript is the AL2 family's join command in a shell script: the cluster's name, and the kubelet's flags.
var bootstrapScript = regexp.MustCompile(`/etc/eks/bootstrap\.sh\s+([A-Za-z0-9_-]+)(?:.*--kubelet-extra-args[= ]+['"]([^'"]*)['"])?`)

// applyBootstrapScript reads the kubelet flags a script's bootstrap.sh call passes, and returns the cluster it
// joins (false when the script does not call it).
func (cfg *kubeletConfig) applyBootstrapScript(script string) (string, bool) {
	m := bootstrapScript.FindStringSubmatch(script)
	if m == nil {
		return "", false
	}
	cfg.applyFlags(strings.Fields(m[2]))
	return m[1], true
}

// applyFlags reads the kubelet flags nodeadm passes that the sandbox's kubelet honours: --node-labels and
// --register-with-taints.
func (cfg *kubeletConfig) applyFlags(flags []string) {
	for _, f := range flags {
		switch {
		case strings.HasPrefix(f, "--node-labels="):
			for _, kv := range strings.Split(strings.TrimPrefix(f, "--node-labels="), ",") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					cfg.labels[k] = v
				}
			}
		case strings.HasPrefix(f, "--register-with-taints="):
			for _, spec := range strings.Split(strings.TrimPrefix(f, "--register-with-taints="), ",") {
				if t, ok := parseTaint(spec); ok {
					cfg.taints = append(cfg.taints, t)
				}
			}
		}
	}
}

func parseTaint(spec string) (corev1.Taint, bool) {
	kv, effect, ok := strings.Cut(spec, ":")
	if !ok {
		return corev1.Taint{}, false
	}
	key, value, _ := strings.Cut(kv, "=")
	return corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)}, true
}

func parseBottlerocket(ud string, cfg *kubeletConfig) error {
	var doc struct {
		Settings struct {
			Kubernetes struct {
				ClusterName    string              `toml:"cluster-name"`
				APIServer      string              `toml:"api-server"`
				MaxPods        int64               `toml:"max-pods"`
				NodeLabels     map[string]string   `toml:"node-labels"`
				NodeTaints     map[string][]string `toml:"node-taints"`
				KubeReserved   map[string]string   `toml:"kube-reserved"`
				SystemReserved map[string]string   `toml:"system-reserved"`
				EvictionHard   map[string]string   `toml:"eviction-hard"`
			} `toml:"kubernetes"`
		} `toml:"settings"`
	}
	if _, err := toml.Decode(ud, &doc); err != nil {
		return fmt.Errorf("reading the Bottlerocket TOML: %w", err)
	}
	k := doc.Settings.Kubernetes
	if k.ClusterName == "" || k.APIServer == "" {
		return fmt.Errorf("the Bottlerocket settings lack the cluster name or API server")
	}
	cfg.maxPods = k.MaxPods
	for key, v := range k.NodeLabels {
		cfg.labels[key] = v
	}
	for key, values := range k.NodeTaints {
		for _, v := range values {
			if t, ok := parseTaint(key + "=" + v); ok {
				cfg.taints = append(cfg.taints, t)
			}
		}
	}
	cfg.kubeReserved, cfg.systemReserved, cfg.evictionHard = k.KubeReserved, k.SystemReserved, k.EvictionHard
	return nil
}
