/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"k8s.io/utils/clock"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// discoveryTTL is how long resolved subnets, security groups and AMIs are reused; failureTTL how long a failed
// resolution is (every launch, solve and status pass in that time gets the same error without calling AWS).
const (
	discoveryTTL = time.Minute
	failureTTL   = 30 * time.Second
)

// Resolved is what an EC2NodeClass's selector terms resolve to.
type Resolved struct {
	// Subnets, most free addresses first, at most one per zone used for launching.
	Subnets []Subnet
	// SecurityGroupIDs sorted.
	SecurityGroupIDs []string
	// AMIs by architecture (amd64, arm64): the newest image matching the terms; an alias also gives the images
	// of GPU and Neuron types, by architecture and variant ("amd64/nvidia"; see ImageFor).
	AMIs map[string]AMI
	// InstanceProfile the nodes run with; InstanceProfileProblem says why it cannot be used yet (empty when it
	// can).
	InstanceProfile        string
	InstanceProfileProblem string
	// Reservations are the active capacity reservations the terms select in the subnets' zones.
	Reservations []Reservation
	// PlacementGroup is the group placementGroupSelector selects (nil without one, or when it selects none).
	PlacementGroup *PlacementGroup
	// Problems say what did not resolve (empty when the node class is usable).
	Problems []string
}

// Subnet is a resolved subnet.
type Subnet struct {
	ID, Zone, ZoneID string
	FreeIPs          int32
}

// AMI is a resolved image.
type AMI struct {
	ID, Name, Architecture string
	Created                string
	// FromAlias is true for an image an alias resolved to: it serves only the types of its variant.
	FromAlias bool
	// Deprecated: AWS deprecated the image (DescribeImages' DeprecationTime is past).
	Deprecated bool
}

// Zones returns the zones of the resolved subnets.
func (r *Resolved) Zones() map[string]bool {
	out := map[string]bool{}
	for _, s := range r.Subnets {
		out[s.Zone] = true
	}
	return out
}

// ZoneIDs maps the zones of the resolved subnets to their IDs.
func (r *Resolved) ZoneIDs() map[string]string {
	out := map[string]string{}
	for _, s := range r.Subnets {
		if s.ZoneID != "" {
			out[s.Zone] = s.ZoneID
		}
	}
	return out
}

// SubnetFor returns the subnet of a zone with the most free addresses.
func (r *Resolved) SubnetFor(zone string) (Subnet, bool) {
	for _, s := range r.Subnets {
		if s.Zone == zone {
			return s, true
		}
	}
	return Subnet{}, false
}

type discovery struct {
	ec2         *ec2.Client
	ssm         *ssm.Client
	profiles    *instanceProfiles
	clusterName string
	// version is the Kubernetes minor the aliases' AMIs are for
	version func() (string, error)
	clock   clock.PassiveClock

	mu    sync.Mutex
	cache map[string]cachedResolution // by node class name + generation
	// learnt from the subnets and reservations resolved: the zones' IDs, and which reservations are interruptible
	zoneIDs        map[string]string
	interruptibles map[string]bool
}

// zoneID returns the ID of a zone of a subnet resolved ("" when none was).
func (d *discovery) zoneID(zone string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.zoneIDs[zone]
}

// interruptible reports whether a reservation resolved is interruptible.
func (d *discovery) interruptible(reservation string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.interruptibles[reservation]
}

// learn records the zone IDs and the interruptible reservations of a resolution.
func (d *discovery) learn(res *Resolved) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.zoneIDs == nil {
		d.zoneIDs, d.interruptibles = map[string]string{}, map[string]bool{}
	}
	for zone, id := range res.ZoneIDs() {
		d.zoneIDs[zone] = id
	}
	for _, r := range res.Reservations {
		d.interruptibles[r.ID] = r.Interruptible
	}
}

// forget drops the cached resolution of every node class (a launch used a reservation: its room changed).
func (d *discovery) forget() {
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.cache)
}

type cachedResolution struct {
	at  time.Time
	res *Resolved
	err error
}

// resolve returns what a node class resolves to, from the cache when it is fresh.
func (d *discovery) resolve(ctx context.Context, nc *stevedorev1.EC2NodeClass) (*Resolved, error) {
	// the finalizer lets the managed instance profile be created; another Kubernetes version has other AMIs
	k8s, _ := d.version()
	key := fmt.Sprintf("%s/%d/%s/%t/%s", nc.Name, nc.Generation, nc.UID, stevedorev1.HasTerminationFinalizer(nc.Finalizers), k8s)
	d.mu.Lock()
	c, ok := d.cache[key]
	d.mu.Unlock()
	if ok && c.err != nil && d.clock.Since(c.at) < failureTTL {
		return nil, c.err
	}
	if ok && c.err == nil && d.clock.Since(c.at) < discoveryTTL {
		return c.res, nil
	}
	res, err := d.resolveNow(ctx, nc)
	if err != nil && ctx.Err() != nil {
		return nil, err // cancelled: says nothing about the node class
	}
	if err == nil {
		d.learn(res)
	}
	d.mu.Lock()
	d.cache[key] = cachedResolution{at: d.clock.Now(), res: res, err: err}
	d.mu.Unlock()
	return res, err
}

func (d *discovery) resolveNow(ctx context.Context, nc *stevedorev1.EC2NodeClass) (*Resolved, error) {
	res := &Resolved{AMIs: map[string]AMI{}}
	var err error
	if res.Subnets, err = d.subnets(ctx, nc.Spec.SubnetSelectorTerms); err != nil {
		return nil, fmt.Errorf("subnets: %w", err)
	}
	if len(res.Subnets) == 0 {
		res.Problems = append(res.Problems, "no subnet matches subnetSelectorTerms")
	}
	if res.SecurityGroupIDs, err = d.securityGroups(ctx, d.securityGroupTerms(nc)); err != nil {
		return nil, fmt.Errorf("security groups: %w", err)
	}
	if len(res.SecurityGroupIDs) == 0 {
		res.Problems = append(res.Problems, "no security group matches securityGroupSelectorTerms")
	}
	if res.AMIs, err = d.amis(ctx, nc); err != nil {
		return nil, fmt.Errorf("AMIs: %w", err)
	}
	if len(res.AMIs) == 0 {
		res.Problems = append(res.Problems, "no AMI matches amiSelectorTerms")
	}
	if len(nc.Spec.CapacityReservationSelectorTerms) > 0 {
		if res.Reservations, err = d.reservations(ctx, nc.Spec.CapacityReservationSelectorTerms, res.Zones()); err != nil {
			return nil, fmt.Errorf("capacity reservations: %w", err)
		}
	}
	if sel := nc.Spec.PlacementGroupSelector; sel != nil {
		var problem string
		if res.PlacementGroup, problem, err = d.placementGroup(ctx, sel); err != nil {
			return nil, fmt.Errorf("placement group: %w", err)
		}
		if problem != "" {
			res.Problems = append(res.Problems, problem)
		}
	}
	res.InstanceProfile, err = d.profiles.resolve(ctx, nc)
	var problem *errProfileProblem
	switch {
	case errors.As(err, &problem):
		res.InstanceProfileProblem = problem.msg
		res.Problems = append(res.Problems, problem.msg)
	case err != nil:
		return nil, fmt.Errorf("instance profile: %w", err)
	}
	return res, nil
}

func (d *discovery) securityGroupTerms(nc *stevedorev1.EC2NodeClass) []stevedorev1.SecurityGroupSelectorTerm {
	if len(nc.Spec.SecurityGroupSelectorTerms) > 0 {
		return nc.Spec.SecurityGroupSelectorTerms
	}
	// The EKS cluster security group, which EKS tags with the cluster's name.
	return []stevedorev1.SecurityGroupSelectorTerm{{Tags: map[string]string{"aws:eks:cluster-name": d.clusterName}}}
}

func tagFilters(tags map[string]string) []ec2types.Filter {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []ec2types.Filter
	for _, k := range keys {
		if tags[k] == "*" {
			out = append(out, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
		} else {
			out = append(out, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{tags[k]}})
		}
	}
	return out
}

func (d *discovery) subnets(ctx context.Context, terms []stevedorev1.SubnetSelectorTerm) ([]Subnet, error) {
	byID := map[string]Subnet{}
	for _, term := range terms {
		in := &ec2.DescribeSubnetsInput{Filters: tagFilters(term.Tags)}
		if term.ID != "" {
			in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("subnet-id"), Values: []string{term.ID}})
		}
		err := eachPage(ctx, "DescribeSubnets", ec2.NewDescribeSubnetsPaginator(d.ec2, in), func(out *ec2.DescribeSubnetsOutput) {
			for _, s := range out.Subnets {
				byID[aws.ToString(s.SubnetId)] = Subnet{ID: aws.ToString(s.SubnetId), Zone: aws.ToString(s.AvailabilityZone),
					ZoneID: aws.ToString(s.AvailabilityZoneId), FreeIPs: aws.ToInt32(s.AvailableIpAddressCount)}
			}
		})
		if err != nil {
			return nil, err
		}
	}
	out := make([]Subnet, 0, len(byID))
	for _, s := range byID {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].FreeIPs != out[j].FreeIPs {
			return out[i].FreeIPs > out[j].FreeIPs
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

func (d *discovery) securityGroups(ctx context.Context, terms []stevedorev1.SecurityGroupSelectorTerm) ([]string, error) {
	ids := map[string]bool{}
	for _, term := range terms {
		in := &ec2.DescribeSecurityGroupsInput{Filters: tagFilters(term.Tags)}
		if term.ID != "" {
			in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("group-id"), Values: []string{term.ID}})
		}
		if term.Name != "" {
			in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("group-name"), Values: []string{term.Name}})
		}
		err := eachPage(ctx, "DescribeSecurityGroups", ec2.NewDescribeSecurityGroupsPaginator(d.ec2, in), func(out *ec2.DescribeSecurityGroupsOutput) {
			for _, g := range out.SecurityGroups {
				ids[aws.ToString(g.GroupId)] = true
			}
		})
		if err != nil {
			return nil, err
		}
	}
	out := make([]string, 0, len(ids))
	for id := range ids {
		out = append(out, id)
	}
	sort.Strings(out)
	return out, nil
}

// aliasParameter is a public SSM parameter naming one of an alias's AMIs: the image for an architecture's
// standard types (keys "amd64", "arm64") or for its GPU or Neuron types ("amd64/nvidia", "amd64/neuron",
// "arm64/nvidia"), as imageKey names them.
type aliasParameter struct {
	keys     []string
	path     string
	required bool
}

// aliasParameters returns the public SSM parameters naming an alias's AMIs for a Kubernetes minor version: the
// standard images (required) and the NVIDIA and Neuron variants AWS publishes for the family (used when they
// exist). An alias pinned to a release (al2023@v20251120, bottlerocket@v1.52.0) names AWS's versioned parameters
// of that release, @latest the parameters AWS moves to each new release.
func aliasParameters(alias, k8s string) ([]aliasParameter, error) {
	family, release, _ := strings.Cut(alias, "@")
	switch family {
	case "al2023":
		base := "/aws/service/eks/optimized-ami/" + k8s + "/amazon-linux-2023/"
		image := func(arch, variant string) string {
			if release == "latest" {
				return base + arch + "/" + variant + "/recommended/image_id"
			}
			return base + arch + "/" + variant + "/amazon-eks-node-al2023-" + arch + "-" + variant + "-" + k8s + "-" + release + "/image_id"
		}
		return []aliasParameter{
			{keys: []string{stevedorev1.ArchitectureAMD64}, path: image("x86_64", "standard"), required: true},
			{keys: []string{stevedorev1.ArchitectureARM64}, path: image("arm64", "standard"), required: true},
			{keys: []string{"amd64/nvidia"}, path: image("x86_64", "nvidia")},
			{keys: []string{"amd64/neuron"}, path: image("x86_64", "neuron")},
			{keys: []string{"arm64/nvidia"}, path: image("arm64", "nvidia")},
		}, nil
	case "bottlerocket":
		// Bottlerocket's parameters name a release without its leading v
		release = strings.TrimPrefix(release, "v")
		base := "/aws/service/bottlerocket/aws-k8s-" + k8s
		return []aliasParameter{
			// Bottlerocket's standard x86_64 image carries the Neuron driver
			{keys: []string{stevedorev1.ArchitectureAMD64, "amd64/neuron"}, path: base + "/x86_64/" + release + "/image_id", required: true},
			{keys: []string{stevedorev1.ArchitectureARM64}, path: base + "/arm64/" + release + "/image_id", required: true},
			{keys: []string{"amd64/nvidia"}, path: base + "-nvidia/x86_64/" + release + "/image_id"},
			{keys: []string{"arm64/nvidia"}, path: base + "-nvidia/arm64/" + release + "/image_id"},
		}, nil
	}
	return nil, fmt.Errorf("alias %q: unknown family", alias)
}

// imageKey is the key of Resolved.AMIs a type of an architecture needing an image variant is launched with.
func imageKey(arch, variant string) string {
	if variant == "" || variant == "standard" {
		return arch
	}
	return arch + "/" + variant
}

// ImageFor returns the AMI for a type of an architecture needing an image variant (cloud.ImageVariant): the alias's
// variant image, or an image the node class selected by id, name, tags or SSM parameter, which serves every type
// of its architecture.
func ImageFor(amis map[string]AMI, arch, variant string) (AMI, bool) {
	if ami, ok := amis[imageKey(arch, variant)]; ok {
		return ami, true
	}
	ami, ok := amis[arch]
	return ami, ok && !ami.FromAlias
}

// amis resolves a node class's AMI selector terms (an alias of al2023 or bottlerocket by default) to the images it
// launches, by key (an architecture, or architecture/variant for an alias's variant images).
func (d *discovery) amis(ctx context.Context, nc *stevedorev1.EC2NodeClass) (map[string]AMI, error) {
	terms := nc.Spec.AMISelectorTerms
	if len(terms) == 0 {
		alias := "al2023@latest"
		if nc.AMIFamilyOrDefault() == stevedorev1.AMIFamilyBottlerocket {
			alias = "bottlerocket@latest"
		}
		terms = []stevedorev1.AMISelectorTerm{{Alias: alias}}
	}
	var q imageQuery
	q.aliasKeys = map[string][]string{}
	for _, term := range terms {
		if err := d.addTerm(ctx, &q, term); err != nil {
			return nil, err
		}
	}
	images, err := d.describeImages(ctx, q)
	if err != nil {
		return nil, err
	}
	return pickImages(images, q.aliasKeys, d.clock.Now()), nil
}

// imageQuery is what AMI selector terms ask DescribeImages for: image ids, and filters each with its owners.
type imageQuery struct {
	ids []string
	// aliasKeys maps an image id an alias resolved to the keys of Resolved.AMIs it fills.
	aliasKeys map[string][]string
	filters   [][]ec2types.Filter
	owners    [][]string
}

// addTerm adds one AMI selector term to q: an alias and an SSM parameter are resolved to image ids through SSM.
func (d *discovery) addTerm(ctx context.Context, q *imageQuery, term stevedorev1.AMISelectorTerm) error {
	switch {
	case term.Alias != "":
		return d.addAlias(ctx, q, term.Alias)
	case term.SSMParameter != "":
		out, err := d.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(term.SSMParameter)})
		if err != nil {
			return fmt.Errorf("SSM parameter %s: %w", term.SSMParameter, err)
		}
		q.ids = append(q.ids, aws.ToString(out.Parameter.Value))
	case term.ID != "":
		q.ids = append(q.ids, term.ID)
	default:
		f := tagFilters(term.Tags)
		if term.Name != "" {
			f = append(f, ec2types.Filter{Name: aws.String("name"), Values: []string{term.Name}})
		}
		q.filters = append(q.filters, f)
		if term.Owner != "" {
			q.owners = append(q.owners, []string{term.Owner})
		} else {
			q.owners = append(q.owners, []string{"self", "amazon"})
		}
	}
	return nil
}

// addAlias adds the images of an alias to q: the EKS-optimized images AWS publishes for the API server's
// Kubernetes version, through their SSM parameters (a variant AWS does not publish is left out; the standard
// image must exist).
func (d *discovery) addAlias(ctx context.Context, q *imageQuery, alias string) error {
	k8s, err := d.version()
	if err != nil {
		return fmt.Errorf("alias %s: %w", alias, err)
	}
	params, err := aliasParameters(alias, k8s)
	if err != nil {
		return err
	}
	for _, param := range params {
		out, err := d.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(param.path)})
		switch {
		case err != nil && isParameterNotFound(err) && !param.required:
			continue
		case err != nil && isParameterNotFound(err):
			return fmt.Errorf("alias %s: AWS publishes no such image for Kubernetes %s (SSM parameter %s not found): %w", alias, k8s, param.path, err)
		case err != nil:
			return fmt.Errorf("SSM parameter %s: %w", param.path, err)
		}
		id := aws.ToString(out.Parameter.Value)
		q.aliasKeys[id] = append(q.aliasKeys[id], param.keys...)
		q.ids = append(q.ids, id)
	}
	return nil
}

// describeImages runs q: one DescribeImages for the ids, one per filter.
func (d *discovery) describeImages(ctx context.Context, q imageQuery) ([]ec2types.Image, error) {
	var images []ec2types.Image
	if len(q.ids) > 0 {
		// a pinned alias may name a release AWS has deprecated since: it is still the image asked for
		out, err := d.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: q.ids, IncludeDeprecated: aws.Bool(true)})
		if err != nil {
			return nil, err
		}
		images = append(images, out.Images...)
	}
	for i, f := range q.filters {
		out, err := d.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: f, Owners: q.owners[i]})
		if err != nil {
			return nil, err
		}
		images = append(images, out.Images...)
	}
	return images, nil
}

// deprecated reports whether an image's deprecation time has passed.
func deprecated(img ec2types.Image, now time.Time) bool {
	t, err := time.Parse(time.RFC3339, aws.ToString(img.DeprecationTime))
	return err == nil && !now.Before(t)
}

// pickImages keys the images found: an alias's image under the keys it fills, any other under its architecture,
// the newest (then the greatest id) when several share one.
func pickImages(images []ec2types.Image, aliasKeys map[string][]string, now time.Time) map[string]AMI {
	result := map[string]AMI{}
	for _, img := range images {
		arch := string(img.Architecture)
		if arch == "x86_64" {
			arch = stevedorev1.ArchitectureAMD64
		}
		if arch != stevedorev1.ArchitectureAMD64 && arch != stevedorev1.ArchitectureARM64 {
			continue
		}
		id, created := aws.ToString(img.ImageId), aws.ToString(img.CreationDate)
		ami := AMI{ID: id, Name: aws.ToString(img.Name), Architecture: arch, Created: created, Deprecated: deprecated(img, now)}
		if keys, ok := aliasKeys[id]; ok {
			ami.FromAlias = true
			for _, key := range keys {
				result[key] = ami
			}
			continue
		}
		cur, ok := result[arch]
		if !ok || created > cur.Created || (created == cur.Created && id > cur.ID) {
			result[arch] = ami
		}
	}
	return result
}
