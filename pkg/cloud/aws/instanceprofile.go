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
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	corev1 "k8s.io/api/core/v1"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
)

// TagEC2NodeClass names, on an instance profile Stevedore manages, the EC2NodeClass it serves.
const TagEC2NodeClass = "stevedore.dev/ec2nodeclass"

// ManagedInstanceProfileName is the name of the instance profile Stevedore creates for the role of an
// EC2NodeClass: the cluster's name (cut to 64 characters) and a hash of cluster, region and node class, so that
// two clusters or regions of an account never share one; at most 128 characters, as IAM allows.
func ManagedInstanceProfileName(clusterName, region, nodeClass string) string {
	sum := sha256.Sum256([]byte(clusterName + "/" + region + "/" + nodeClass))
	prefix := clusterName
	if len(prefix) > 64 {
		prefix = prefix[:64]
	}
	return prefix + "_" + hex.EncodeToString(sum[:8])
}

// managedProfilePath is the IAM path of the instance profiles Stevedore creates for a cluster.
func managedProfilePath(clusterName, region string) string {
	return "/stevedore/" + region + "/" + clusterName + "/"
}

// instanceProfiles creates, tags, reuses and deletes the instance profiles of EC2NodeClasses that name a role,
// and checks that the profiles named by instanceProfile exist. A profile seen in the wanted state is not asked
// about again until its node class's role changes: a cluster at rest makes no IAM calls.
type instanceProfiles struct {
	iam                 *iam.Client
	clusterName, region string

	// ensuring serialises the IAM writes of ensure: concurrent first launches for a node class would otherwise
	// each create the profile (EntityAlreadyExists) or add its role (the one-role quota)
	ensuring sync.Mutex

	mu sync.Mutex
	// ready holds, by profile name, the role a profile was last seen holding ("" for a user's profile checked
	// to exist)
	ready map[string]string
}

func newInstanceProfiles(client *iam.Client, clusterName, region string) *instanceProfiles {
	return &instanceProfiles{iam: client, clusterName: clusterName, region: region, ready: map[string]string{}}
}

func (p *instanceProfiles) known(name, role string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.ready[name]
	return ok && r == role
}

func (p *instanceProfiles) remember(name, role string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ready[name] = role
}

func (p *instanceProfiles) forget(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.ready, name)
}

// errProfileProblem is a resolution problem the user must fix (a missing role or profile), not an AWS failure.
type errProfileProblem struct{ msg string }

func (e *errProfileProblem) Error() string { return e.msg }

// resolve returns the instance profile an EC2NodeClass's nodes run with: the one it names, checked to exist, or
// the one Stevedore manages for its role, created or brought to hold that role. A problem the user must fix is
// returned as *errProfileProblem.
func (p *instanceProfiles) resolve(ctx context.Context, nc *stevedorev1.EC2NodeClass) (string, error) {
	if nc.Spec.InstanceProfile != nil {
		return *nc.Spec.InstanceProfile, p.check(ctx, *nc.Spec.InstanceProfile)
	}
	name := ManagedInstanceProfileName(p.clusterName, p.region, nc.Name)
	if !stevedorev1.HasTerminationFinalizer(nc.Finalizers) {
		// created only once the node class cannot go without Stevedore deleting it
		return name, &errProfileProblem{"instance profile for role " + nc.Spec.Role + " not created yet: waiting for the " +
			stevedorev1.TerminationFinalizer + " finalizer"}
	}
	return name, p.ensure(ctx, name, nc)
}

func (p *instanceProfiles) check(ctx context.Context, name string) error {
	if p.known(name, "") {
		return nil
	}
	out, err := p.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if isNoSuchEntity(err) {
		return &errProfileProblem{"instance profile " + name + " does not exist"}
	}
	if err != nil {
		return fmt.Errorf("reading instance profile %s: %w", name, err)
	}
	if len(out.InstanceProfile.Roles) == 0 {
		return &errProfileProblem{"instance profile " + name + " holds no role"}
	}
	p.remember(name, "")
	return nil
}

// roleName is the name of a role given by name or ARN (arn:aws:iam::111122223333:role/some/path/Name).
func roleName(role string) string {
	if strings.HasPrefix(role, "arn:") {
		return role[strings.LastIndexByte(role, '/')+1:]
	}
	return role
}

func (p *instanceProfiles) ensure(ctx context.Context, name string, nc *stevedorev1.EC2NodeClass) error {
	role := roleName(nc.Spec.Role)
	if p.known(name, role) {
		return nil
	}
	p.ensuring.Lock()
	defer p.ensuring.Unlock()
	if p.known(name, role) {
		return nil // ensured while this call waited
	}
	var profile *iamtypes.InstanceProfile
	out, err := p.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	switch {
	case isNoSuchEntity(err):
		created, err := p.iam.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name),
			Path: aws.String(managedProfilePath(p.clusterName, p.region)), Tags: p.tags(nc.Name)})
		if err != nil {
			return fmt.Errorf("creating instance profile %s: %w", name, err)
		}
		profile = created.InstanceProfile
	case err != nil:
		return fmt.Errorf("reading instance profile %s: %w", name, err)
	default:
		profile = out.InstanceProfile
		if !p.owns(profile.Tags) {
			return &errProfileProblem{fmt.Sprintf("instance profile %s exists without the tag %s=owned: Stevedore does not take over a profile it did not create",
				name, OwnershipTag(p.clusterName))}
		}
		if p.lacksTags(profile.Tags, nc.Name) {
			// all of them: the controller policy lets it tag only with the ownership tags in the request
			if _, err := p.iam.TagInstanceProfile(ctx, &iam.TagInstanceProfileInput{InstanceProfileName: aws.String(name), Tags: p.tags(nc.Name)}); err != nil {
				return fmt.Errorf("tagging instance profile %s: %w", name, err)
			}
		}
	}
	if err := p.holdOnly(ctx, name, role, profile.Roles); err != nil {
		return err
	}
	p.remember(name, role)
	return nil
}

// holdOnly makes the instance profile hold the role and no other, given the roles it holds.
func (p *instanceProfiles) holdOnly(ctx context.Context, name, role string, roles []iamtypes.Role) error {
	holds := false
	for _, r := range roles {
		if aws.ToString(r.RoleName) == role {
			holds = true
			continue
		}
		if _, err := p.iam.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name),
			RoleName: r.RoleName}); err != nil && !isNoSuchEntity(err) {
			return fmt.Errorf("removing role %s from instance profile %s: %w", aws.ToString(r.RoleName), name, err)
		}
	}
	if !holds {
		_, err := p.iam.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(role)})
		if isNoSuchEntity(err) {
			return &errProfileProblem{"role " + role + " does not exist"}
		}
		if err != nil {
			return fmt.Errorf("adding role %s to instance profile %s: %w", role, name, err)
		}
	}
	return nil
}

// remove deletes the instance profile Stevedore manages for a node class, if there is one and it carries the
// cluster's ownership tag.
func (p *instanceProfiles) remove(ctx context.Context, nodeClass string) error {
	name := ManagedInstanceProfileName(p.clusterName, p.region, nodeClass)
	p.forget(name)
	out, err := p.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if isNoSuchEntity(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading instance profile %s: %w", name, err)
	}
	if !p.owns(out.InstanceProfile.Tags) {
		return nil
	}
	for _, r := range out.InstanceProfile.Roles {
		if _, err := p.iam.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name),
			RoleName: r.RoleName}); err != nil && !isNoSuchEntity(err) {
			return fmt.Errorf("removing role %s from instance profile %s: %w", aws.ToString(r.RoleName), name, err)
		}
	}
	if _, err := p.iam.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil && !isNoSuchEntity(err) {
		return fmt.Errorf("deleting instance profile %s: %w", name, err)
	}
	return nil
}

// tags are the tags of a managed instance profile, sorted by key.
func (p *instanceProfiles) tags(nodeClass string) []iamtypes.Tag {
	return []iamtypes.Tag{
		{Key: aws.String(TagEKSClusterName), Value: aws.String(p.clusterName)},
		{Key: aws.String(OwnershipTag(p.clusterName)), Value: aws.String(ownedTagValue)},
		{Key: aws.String(TagEC2NodeClass), Value: aws.String(nodeClass)},
		{Key: aws.String(corev1.LabelTopologyRegion), Value: aws.String(p.region)},
	}
}

func (p *instanceProfiles) owns(tags []iamtypes.Tag) bool {
	for _, t := range tags {
		if aws.ToString(t.Key) == OwnershipTag(p.clusterName) && aws.ToString(t.Value) == ownedTagValue {
			return true
		}
	}
	return false
}

func (p *instanceProfiles) lacksTags(have []iamtypes.Tag, nodeClass string) bool {
	got := map[string]string{}
	for _, t := range have {
		got[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	for _, t := range p.tags(nodeClass) {
		if v, ok := got[aws.ToString(t.Key)]; !ok || v != aws.ToString(t.Value) {
			return true
		}
	}
	return false
}

func isNoSuchEntity(err error) bool {
	var nse *iamtypes.NoSuchEntityException
	return errors.As(err, &nse) || errorCode(err) == "NoSuchEntity"
}
