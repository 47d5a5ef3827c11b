/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/klog/v2"
)

// LaunchTemplateIdle is how long a launch template of this cluster may go unused by a launch before it is
// deleted. Templates are named by their content: a changed node class, AMI or NodePool label makes a new one, and
// the old one would otherwise stay for ever. A template deleted while instances launched from it run does them no
// harm, and one needed again is recreated.
const LaunchTemplateIdle = time.Hour

// CollectLaunchTemplates deletes this cluster's launch templates (tagged with its ownership tag, named
// stevedore/<cluster>/...) that no launch of this process used for LaunchTemplateIdle; a template the process has
// not seen yet counts as used when first seen, so a restart never deletes a template in use. It returns how many it
// deleted.
func (p *Provider) CollectLaunchTemplates(ctx context.Context) (int, error) {
	prefix := "stevedore/" + p.opts.ClusterName + "/"
	var names []string
	pages := ec2.NewDescribeLaunchTemplatesPaginator(p.ec2, &ec2.DescribeLaunchTemplatesInput{
		Filters: []ec2types.Filter{{Name: aws.String("tag:" + OwnershipTag(p.opts.ClusterName)), Values: []string{ownedTagValue}}},
	})
	err := eachPage(ctx, "listing launch templates", pages, func(page *ec2.DescribeLaunchTemplatesOutput) {
		for _, lt := range page.LaunchTemplates {
			if name := aws.ToString(lt.LaunchTemplateName); strings.HasPrefix(name, prefix) {
				names = append(names, name)
			}
		}
	})
	if err != nil {
		return 0, err
	}
	sort.Strings(names)
	now := p.opts.Clock.Now()
	var idle []string
	p.ltMu.Lock()
	for _, name := range names {
		used, seen := p.templateUsed[name]
		switch {
		case !seen:
			p.templateUsed[name] = now
		case now.Sub(used) >= LaunchTemplateIdle:
			idle = append(idle, name)
		}
	}
	p.ltMu.Unlock()
	deleted := 0
	for _, name := range idle {
		// under the lock, checked again: a launch that takes the template meanwhile makes it used, and one after
		// the deletion finds it unknown and creates it again
		p.ltMu.Lock()
		if now.Sub(p.templateUsed[name]) < LaunchTemplateIdle {
			p.ltMu.Unlock()
			continue
		}
		delete(p.templates, name)
		delete(p.templateUsed, name)
		_, err := p.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(name)})
		p.ltMu.Unlock()
		if err != nil && !isLaunchTemplateNotFound(err) {
			return deleted, fmt.Errorf("deleting launch template %s: %w", name, err)
		}
		deleted++
		klog.FromContext(ctx).V(2).Info("Deleted launch template: unused", "launchTemplate", name, "idle", LaunchTemplateIdle)
	}
	return deleted, nil
}
