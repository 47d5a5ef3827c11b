/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// TagGang marks a placement group Stevedore created for a gang: the gang ("<namespace>/<PodGroup>", from the
// NodeClaim's stevedore.dev/gang) or the ProvisioningRequest ("<namespace>/<name>"), or the launch group's id where
// the NodeClaim names neither.
const TagGang = stevedorev1.AnnotationGang

// PlacementGroupIdle is how long a gang's placement group stays after this process last launched into it (or first
// saw it) with no instance in it, before the garbage collector deletes it.
const PlacementGroupIdle = 10 * time.Minute

// PlacementGroup is a resolved placement group.
type PlacementGroup struct {
	ID, Name string
	// Strategy is cluster, partition or spread.
	Strategy   string
	Partitions int32
}

// placementGroup resolves a placementGroupSelector to the one available group it selects; problem says why none
// can be used (no group, or more than one).
func (d *discovery) placementGroup(ctx context.Context, sel *stevedorev1.PlacementGroupSelector) (pg *PlacementGroup, problem string, err error) {
	in := &ec2.DescribePlacementGroupsInput{Filters: append(tagFilters(sel.Tags),
		ec2types.Filter{Name: aws.String("state"), Values: []string{string(ec2types.PlacementGroupStateAvailable)}})}
	what := "tags " + fmt.Sprint(sel.Tags)
	switch {
	case sel.Name != "":
		in.Filters, what = append(in.Filters, ec2types.Filter{Name: aws.String("group-name"), Values: []string{sel.Name}}), "name "+sel.Name
	case sel.ID != "":
		in.GroupIds, what = []string{sel.ID}, "id "+sel.ID
	}
	out, err := d.ec2.DescribePlacementGroups(ctx, in)
	if isPlacementGroupUnknown(err) {
		return nil, "no available placement group has " + what, nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("DescribePlacementGroups: %w", err)
	}
	switch n := len(out.PlacementGroups); {
	case n == 0:
		return nil, "no available placement group has " + what, nil
	case n > 1:
		names := make([]string, 0, n)
		for _, g := range out.PlacementGroups {
			names = append(names, aws.ToString(g.GroupName))
		}
		sort.Strings(names)
		return nil, fmt.Sprintf("placementGroupSelector matches %d placement groups (%s): it must select one", n, strings.Join(names, ", ")), nil
	}
	g := out.PlacementGroups[0]
	return &PlacementGroup{ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName), Strategy: string(g.Strategy),
		Partitions: aws.ToInt32(g.PartitionCount)}, "", nil
}

func isPlacementGroupUnknown(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "InvalidPlacementGroup.Unknown"
}

// placementFor is the placement group a NodeClaim's instance launches into: the node class's, or its gang's own
// cluster group, which is created first ("" for none).
func (p *Provider) placementFor(ctx context.Context, claim *stevedorev1.NodeClaim, nc *stevedorev1.EC2NodeClass, res *Resolved) (string, error) {
	if res.PlacementGroup != nil {
		return res.PlacementGroup.Name, nil
	}
	id, size, ok := claim.LaunchGroup()
	if nc.Spec.GangPlacementGroup != stevedorev1.GangPlacementGroupCluster || !ok || size < 2 {
		return "", nil
	}
	return p.ensureGangPlacementGroup(ctx, claim, nc, id)
}

// gangPlacementGroupName names a gang's placement group after the cluster and the launch group.
func (p *Provider) gangPlacementGroupName(launchGroup string) string {
	sum := sha256.Sum256([]byte(launchGroup))
	return fmt.Sprintf("stevedore-%s-%s", p.opts.ClusterName, hex.EncodeToString(sum[:8]))
}

// ensureGangPlacementGroup creates the cluster placement group of a gang's launch, tagged for the cluster and the
// gang, unless it exists.
func (p *Provider) ensureGangPlacementGroup(ctx context.Context, claim *stevedorev1.NodeClaim, nc *stevedorev1.EC2NodeClass, launchGroup string) (string, error) {
	name := p.gangPlacementGroupName(launchGroup)
	p.ltMu.Lock()
	_, known := p.groupUsed[name] // created by this process, or seen by the collector: it exists
	p.groupUsed[name] = p.opts.Clock.Now()
	p.ltMu.Unlock()
	if known {
		return name, nil
	}
	tags := p.commonTags(claim, nc)
	delete(tags, TagNodeClaim)
	tags[TagGang] = launchGroup
	for _, key := range []string{stevedorev1.AnnotationProvisioningRequest, stevedorev1.AnnotationGang} {
		if gang := claim.Annotations[key]; gang != "" {
			tags[TagGang] = gang
		}
	}
	_, err := p.ec2.CreatePlacementGroup(ctx, &ec2.CreatePlacementGroupInput{GroupName: aws.String(name), Strategy: ec2types.PlacementStrategyCluster,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypePlacementGroup, Tags: toEC2Tags(tags)}}})
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "InvalidPlacementGroup.Duplicate" {
		return name, nil
	}
	if err != nil {
		return "", fmt.Errorf("creating placement group %s for gang %s: %w", name, launchGroup, classifyLaunchError(err))
	}
	klog.FromContext(ctx).Info("Created a cluster placement group for a gang", "placementGroup", name, "launchGroup", launchGroup, "nodeclaim", claim.Name)
	return name, nil
}

// CollectPlacementGroups deletes the placement groups Stevedore created for this cluster's gangs (tagged with its
// ownership tag and stevedore.dev/gang) once no instance runs in them and none has been launched into them for
// PlacementGroupIdle; it returns how many it deleted.
func (p *Provider) CollectPlacementGroups(ctx context.Context) (int, error) {
	out, err := p.ec2.DescribePlacementGroups(ctx, &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + OwnershipTag(p.opts.ClusterName)), Values: []string{ownedTagValue}},
		{Name: aws.String("tag-key"), Values: []string{TagGang}}}})
	if err != nil {
		return 0, fmt.Errorf("listing placement groups: %w", err)
	}
	var names []string
	for _, g := range out.PlacementGroups {
		names = append(names, aws.ToString(g.GroupName))
	}
	sort.Strings(names)
	now := p.opts.Clock.Now()
	deleted := 0
	for _, name := range names {
		p.ltMu.Lock()
		used, seen := p.groupUsed[name]
		if !seen {
			p.groupUsed[name] = now
		}
		p.ltMu.Unlock()
		if !seen || now.Sub(used) < PlacementGroupIdle {
			continue
		}
		busy, err := p.instancesIn(ctx, name)
		if err != nil {
			return deleted, err
		}
		if busy {
			continue
		}
		if _, err := p.ec2.DeletePlacementGroup(ctx, &ec2.DeletePlacementGroupInput{GroupName: aws.String(name)}); err != nil && !isPlacementGroupUnknown(err) {
			return deleted, fmt.Errorf("deleting placement group %s: %w", name, err)
		}
		p.ltMu.Lock()
		delete(p.groupUsed, name)
		p.ltMu.Unlock()
		klog.FromContext(ctx).Info("Deleted a gang's placement group: no instance runs in it", "placementGroup", name)
		deleted++
	}
	return deleted, nil
}

// instancesIn reports whether an instance that is not terminated runs in the placement group.
func (p *Provider) instancesIn(ctx context.Context, group string) (bool, error) {
	out, err := p.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("placement-group-name"), Values: []string{group}},
		{Name: aws.String("instance-state-name"), Values: liveStates()}}})
	if err != nil {
		return false, fmt.Errorf("listing the instances of placement group %s: %w", group, err)
	}
	for _, r := range out.Reservations {
		if len(r.Instances) > 0 {
			return true, nil
		}
	}
	return false, nil
}
