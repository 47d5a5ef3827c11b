// Package catalog reads instance-type catalogs: the embedded default (current-generation t, m, c and r families,
// Intel, AMD and Graviton, generations 5-8, us-east-1 prices) and user files in the same format. A catalog serves
// when the EC2 and pricing APIs cannot be reached, seeds the sandbox's emulated EC2, and feeds `scheduler plan`.
package catalog

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"

	"k8s.io/apimachinery/pkg/api/resource"
)

// File is a catalog file.
type File struct {
	// Region the prices and zones belong to.
	Region string `json:"region"`
	// Generated is the date of the data, Source where it came from.
	Generated string `json:"generated,omitempty"`
	Source    string `json:"source,omitempty"`
	// InstanceTypes, any order.
	InstanceTypes []InstanceType `json:"instanceTypes"`
}

// InstanceType is one instance type and where and at what price it is offered.
type InstanceType struct {
	Name         string `json:"name"`
	Architecture string `json:"architecture"`
	VCPU         int    `json:"vcpu"`
	MemoryMiB    int64  `json:"memoryMiB"`
	// MaxPods is the pod limit; 0 means ENIs x (IPv4PerENI - 1) + 2.
	MaxPods    int    `json:"maxPods,omitempty"`
	ENIs       int    `json:"enis,omitempty"`
	IPv4PerENI int    `json:"ipv4PerEni,omitempty"`
	Hypervisor string `json:"hypervisor,omitempty"`
	// Overhead, when set, replaces the default overhead model (kube-reserved, system-reserved, eviction
	// threshold and VM memory overhead) for this type.
	Overhead *Overhead `json:"overhead,omitempty"`
	// Labels are added to the well-known labels Stevedore derives from the name.
	Labels    map[string]string `json:"labels,omitempty"`
	Offerings []Offering        `json:"offerings"`
}

// Overhead is a fixed per-node overhead.
type Overhead struct {
	CPU             string   `json:"cpu,omitempty"`
	Memory          string   `json:"memory,omitempty"`
	VMMemoryPercent *float64 `json:"vmMemoryPercent,omitempty"`
}

// Offering is an instance type in a zone with a capacity type and an hourly price in USD.
type Offering struct {
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
}

//go:embed default.json
var defaultCatalog []byte

// Default returns the embedded default catalog.
func Default() *File {
	f, err := Read(bytes.NewReader(defaultCatalog))
	if err != nil {
		panic(fmt.Sprintf("the embedded catalog is invalid: %v", err)) // caught by the package's tests
	}
	return f
}

// ReadFile reads and validates a catalog file.
func ReadFile(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", path, err)
	}
	return c, nil
}

// Read decodes a catalog strictly (unknown fields are errors) and validates it.
func Read(r io.Reader) (*File, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9\-]*\.[a-z0-9\-]+$|^[a-z0-9][a-z0-9\-]*$`)

// Validate reports the first problem of a catalog, naming the instance type and field.
func (f *File) Validate() error {
	if f.Region == "" {
		return fmt.Errorf("region: required")
	}
	if len(f.InstanceTypes) == 0 {
		return fmt.Errorf("instanceTypes: at least one is required")
	}
	seen := map[string]bool{}
	for i, it := range f.InstanceTypes {
		where := fmt.Sprintf("instanceTypes[%d] (%s)", i, it.Name)
		if seen[it.Name] {
			return fmt.Errorf("%s.name: duplicate", where)
		}
		seen[it.Name] = true
		if err := it.validate(where); err != nil {
			return err
		}
	}
	return nil
}

// validate checks one instance type; where names it in errors.
func (it InstanceType) validate(where string) error {
	switch {
	case !namePattern.MatchString(it.Name):
		return fmt.Errorf("%s.name: %q is not an instance type name", where, it.Name)
	case it.Architecture != "amd64" && it.Architecture != "arm64":
		return fmt.Errorf("%s.architecture: %q must be amd64 or arm64", where, it.Architecture)
	case it.VCPU <= 0 || it.VCPU > 4096:
		return fmt.Errorf("%s.vcpu: %d out of range", where, it.VCPU)
	case it.MemoryMiB <= 0 || it.MemoryMiB > 64<<20:
		return fmt.Errorf("%s.memoryMiB: %d out of range", where, it.MemoryMiB)
	case it.MaxPods < 0 || it.MaxPods > 10000:
		return fmt.Errorf("%s.maxPods: %d out of range", where, it.MaxPods)
	case it.MaxPods == 0 && (it.ENIs <= 0 || it.IPv4PerENI <= 1):
		return fmt.Errorf("%s: set maxPods, or enis and ipv4PerEni", where)
	case len(it.Offerings) == 0:
		return fmt.Errorf("%s.offerings: at least one is required", where)
	}
	if o := it.Overhead; o != nil {
		for _, field := range []struct{ name, q string }{{"cpu", o.CPU}, {"memory", o.Memory}} {
			if field.q == "" {
				continue
			}
			if v, err := resource.ParseQuantity(field.q); err != nil || v.Sign() < 0 {
				return fmt.Errorf("%s.overhead.%s: %q is not a non-negative quantity", where, field.name, field.q)
			}
		}
		if p := o.VMMemoryPercent; p != nil && (*p < 0 || *p >= 100) {
			return fmt.Errorf("%s.overhead.vmMemoryPercent: %v out of range", where, *p)
		}
	}
	for j, o := range it.Offerings {
		ow := fmt.Sprintf("%s.offerings[%d]", where, j)
		switch {
		case o.Zone == "":
			return fmt.Errorf("%s.zone: required", ow)
		case o.CapacityType != "spot" && o.CapacityType != "on-demand":
			return fmt.Errorf("%s.capacityType: %q must be spot or on-demand", ow, o.CapacityType)
		case !(o.Price > 0) || o.Price > 1000:
			return fmt.Errorf("%s.price: %v must be a positive hourly price", ow, o.Price)
		}
	}
	return nil
}

// PodLimit returns the type's pod limit.
func (it InstanceType) PodLimit() int {
	if it.MaxPods > 0 {
		return it.MaxPods
	}
	return it.ENIs*(it.IPv4PerENI-1) + 2
}
