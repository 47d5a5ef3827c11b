/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package awsemu

import (
	"encoding/base64"
	"strings"

	"github.com/google/uuid"
)

func (e *EC2) createLaunchTemplate(q *query) (any, *apiError) {
	name := q.Str("LaunchTemplateName")
	if name == "" {
		return nil, invalid("MissingParameter", "LaunchTemplateName is required")
	}
	data, apiErr := launchTemplateData(q.Get("LaunchTemplateData"))
	if apiErr != nil {
		return nil, apiErr
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if data.ImageID != "" && e.findImage(data.ImageID) == nil {
		return nil, invalid("InvalidAMIID.NotFound", "the image id '[%s]' does not exist", data.ImageID)
	}
	if _, exists := e.templates[name]; exists {
		return nil, invalid("InvalidLaunchTemplateName.AlreadyExistsException", "launch template name already in use")
	}
	lt := &LaunchTemplate{ID: e.newID("lt"), Name: name, Created: e.clock.Now(), Tags: q.tagSpecs("launch-template"), Data: data}
	e.templates[name] = lt
	return &createLaunchTemplateResponse{RequestID: uuid.NewString(), LaunchTemplate: xmlTemplate(lt)}, nil
}

// launchTemplateData reads the LaunchTemplateData of a CreateLaunchTemplate request.
func launchTemplateData(d *query) (LaunchTemplateData, *apiError) {
	data := LaunchTemplateData{
		ImageID:                 d.Str("ImageId"),
		InstanceProfile:         d.Str("IamInstanceProfile.Name"),
		SecurityGroupIDs:        d.Strings("SecurityGroupId"),
		HTTPTokens:              d.Str("MetadataOptions.HttpTokens"),
		HTTPPutResponseHopLimit: d.Int("MetadataOptions.HttpPutResponseHopLimit", 1),
		HTTPEndpoint:            d.Str("MetadataOptions.HttpEndpoint"),
		Tags:                    map[string]map[string]string{},
		CapacityReservationID:   d.Str("CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"),
		MarketType:              d.Str("InstanceMarketOptions.MarketType"),
	}
	if data.HTTPTokens == "" {
		data.HTTPTokens = "optional" // EC2's own default, which Stevedore must override
	}
	if ud := d.Str("UserData"); ud != "" {
		raw, err := base64.StdEncoding.DecodeString(ud)
		if err != nil {
			return data, invalid("InvalidUserData.Malformed", "user data is not valid base64: %v", err)
		}
		data.UserData = string(raw)
	}
	for _, rt := range []string{"instance", "volume", "network-interface"} {
		if tags := d.tagSpecs(rt); len(tags) > 0 {
			data.Tags[rt] = tags
		}
	}
	return data, data.readDevices(d)
}

// readDevices reads the block devices and network interfaces of a launch template's data.
func (data *LaunchTemplateData) readDevices(d *query) *apiError {
	for _, bd := range d.List("BlockDeviceMapping") {
		data.BlockDevices = append(data.BlockDevices, BlockDevice{DeviceName: bd.Str("DeviceName"),
			VolumeSize: bd.Int("Ebs.VolumeSize", 0), VolumeType: bd.Str("Ebs.VolumeType"), Encrypted: bd.Bool("Ebs.Encrypted", false),
			SnapshotID: bd.Str("Ebs.SnapshotId"), VolumeInitializationRate: bd.Int("Ebs.VolumeInitializationRate", 0)})
		if rate := bd.Int("Ebs.VolumeInitializationRate", 0); rate != 0 && (rate < 100 || rate > 300 || bd.Str("Ebs.SnapshotId") == "") {
			return invalid(codeInvalidParameterValue, "VolumeInitializationRate %d must be 100 to 300 MiB/s, for a volume created from a snapshot", rate)
		}
	}
	for _, ni := range d.List("NetworkInterface") {
		data.NetworkInterfaces = append(data.NetworkInterfaces, NetworkInterface{DeviceIndex: ni.Int("DeviceIndex", 0),
			NetworkCardIndex: ni.Int("NetworkCardIndex", 0), InterfaceType: ni.Str("InterfaceType"), SecurityGroups: ni.Strings("SecurityGroupId"), AssociatePublicIP: ni.Str("AssociatePublicIpAddress"),
			TCPEstablishedTimeout: ni.Int("ConnectionTrackingSpecification.TcpEstablishedTimeout", 0),
			UDPStreamTimeout:      ni.Int("ConnectionTrackingSpecification.UdpStreamTimeout", 0),
			UDPTimeout:            ni.Int("ConnectionTrackingSpecification.UdpTimeout", 0)})
	}
	for _, ni := range data.NetworkInterfaces {
		if ni.InterfaceType != "" && ni.InterfaceType != interfaceTypeEFA && ni.InterfaceType != "interface" {
			return invalid(codeInvalidParameterValue, "InterfaceType %q must be interface or efa", ni.InterfaceType)
		}
	}
	if len(data.NetworkInterfaces) > 0 && len(data.SecurityGroupIDs) > 0 {
		return invalid("InvalidParameterCombination", "Network interfaces and instance-level security groups may not be specified on the same request")
	}
	return nil
}

func xmlTemplate(lt *LaunchTemplate) xmlLaunchTemplate {
	return xmlLaunchTemplate{LaunchTemplateID: lt.ID, LaunchTemplateName: lt.Name, CreateTime: isoTime(lt.Created),
		CreatedBy: "arn:aws:iam::" + "000000000000" + ":role/stevedore", DefaultVersionNumber: 1, LatestVersionNumber: 1, Tags: tagSet(lt.Tags)}
}

// ImageName returns an image's name ("" if unknown).
func (e *EC2) ImageName(id string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if img := e.findImage(id); img != nil {
		return img.Name
	}
	return ""
}

func (e *EC2) findImage(id string) *Image {
	for _, img := range e.images {
		if img.ID == id {
			return img
		}
	}
	return nil
}

func (e *EC2) describeLaunchTemplates(q *query) (any, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	names, ids := q.Strings("LaunchTemplateName"), q.Strings("LaunchTemplateId")
	var items []xmlLaunchTemplate
	for _, name := range sortedKeys(e.templates) {
		lt := e.templates[name]
		if len(names) > 0 && !matchValue(names, lt.Name) || len(ids) > 0 && !matchValue(ids, lt.ID) {
			continue
		}
		if !matchFilters(q.Filters(), lt.Tags, map[string]string{"launch-template-name": lt.Name}) {
			continue
		}
		items = append(items, xmlTemplate(lt))
	}
	if len(names) > 0 && len(items) == 0 {
		return nil, invalid("InvalidLaunchTemplateName.NotFoundException", "at least one of the launch templates specified in the request does not exist")
	}
	start, end, next := paginate(len(items), q, 200)
	return &describeLaunchTemplatesResponse{RequestID: uuid.NewString(), LaunchTemplates: items[start:end], NextToken: next}, nil
}

func (e *EC2) deleteLaunchTemplate(q *query) (any, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for name, lt := range e.templates {
		if lt.Name == q.Str("LaunchTemplateName") || lt.ID == q.Str("LaunchTemplateId") {
			delete(e.templates, name)
			return &deleteLaunchTemplateResponse{RequestID: uuid.NewString(), LaunchTemplate: xmlTemplate(lt)}, nil
		}
	}
	return nil, invalid("InvalidLaunchTemplateName.NotFoundException", "the specified launch template does not exist")
}

func (e *EC2) createTags(q *query) (any, *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	tags := map[string]string{}
	for _, t := range q.List("Tag") {
		tags[t.Str("Key")] = t.Str("Value")
	}
	for _, id := range q.Strings("ResourceId") {
		if inst, ok := e.instances[id]; ok {
			for k, v := range tags {
				inst.Tags[k] = v
			}
			continue
		}
		if strings.HasPrefix(id, "i-") {
			return nil, invalid("InvalidInstanceID.NotFound", "the instance ID '%s' does not exist", id)
		}
	}
	return &createTagsResponse{RequestID: uuid.NewString(), Return: true}, nil
}
