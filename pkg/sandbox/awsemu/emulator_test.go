/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package awsemu

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	pricingsdk "github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go"
)

func startEmulator(t *testing.T) *Emulator {
	t.Helper()
	e, err := Start(Options{ClusterName: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

func sdkConfig(e *Emulator) aws.Config {
	return aws.Config{
		Region:       e.Region(),
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		BaseEndpoint: aws.String(e.URL()),
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func launchTemplate(t *testing.T, client *ec2.Client, name string) {
	t.Helper()
	_, err := client.CreateLaunchTemplate(ctx(t), &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			UserData:        aws.String("IyEvYmluL2Jhc2g="),
			MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{HttpTokens: ec2types.LaunchTemplateHttpTokensStateRequired},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// discoverySubnets returns the emulator's three subnets tagged for discovery.
func discoverySubnets(t *testing.T, client *ec2.Client) []ec2types.Subnet {
	t.Helper()
	out, err := client.DescribeSubnets(ctx(t), &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{"test"}}}})
	if err != nil || len(out.Subnets) != 3 {
		t.Fatalf("subnets = %v, %v", out, err)
	}
	return out.Subnets
}

func TestCreateFleetFallsBackPastPoolsWithoutCapacityAndHonoursClientToken(t *testing.T) {
	e := startEmulator(t)
	client := ec2.NewFromConfig(sdkConfig(e))
	launchTemplate(t, client, "lt")
	subnets := discoverySubnets(t, client)
	subnetA := aws.ToString(subnets[0].SubnetId)
	e.EC2.SetCapacity("m5.large", "us-east-1a", "spot", 0)
	in := &ec2.CreateFleetInput{
		Type:        ec2types.FleetTypeInstant,
		ClientToken: aws.String("token-1"),
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("lt"), Version: aws.String("$Latest")},
			Overrides: []ec2types.FleetLaunchTemplateOverridesRequest{
				{InstanceType: "m5.large", SubnetId: aws.String(subnetA)},
				{InstanceType: "m5.xlarge", SubnetId: aws.String(subnetA)},
			},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(2), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeSpot},
		SpotOptions:                 &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance,
			Tags: []ec2types.Tag{{Key: aws.String("kubernetes.io/cluster/test"), Value: aws.String("owned")}}}},
	}
	out, err := client.CreateFleet(ctx(t), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "InsufficientInstanceCapacity" ||
		out.Errors[0].LaunchTemplateAndOverrides.Overrides.InstanceType != "m5.large" {
		t.Fatalf("errors = %+v, want one InsufficientInstanceCapacity for m5.large", out.Errors)
	}
	if len(out.Instances) != 1 || out.Instances[0].InstanceType != "m5.xlarge" || len(out.Instances[0].InstanceIds) != 2 {
		t.Fatalf("instances = %+v, want 2 m5.xlarge", out.Instances)
	}
	again, err := client.CreateFleet(ctx(t), in)
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(again.FleetId) != aws.ToString(out.FleetId) || len(e.EC2.Instances()) != 2 {
		t.Fatalf("a repeated ClientToken must return the first fleet and launch nothing; instances = %d", len(e.EC2.Instances()))
	}
	desc, err := client.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:kubernetes.io/cluster/test"), Values: []string{"owned"}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}}}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range desc.Reservations {
		for _, i := range r.Instances {
			ids = append(ids, aws.ToString(i.InstanceId))
			if i.InstanceLifecycle != ec2types.InstanceLifecycleTypeSpot || aws.ToString(i.Placement.AvailabilityZone) != "us-east-1a" ||
				aws.ToString(i.PrivateDnsName) == "" || i.MetadataOptions.HttpTokens != ec2types.HttpTokensStateRequired {
				t.Errorf("instance %+v", i)
			}
		}
	}
	if len(ids) != 2 {
		t.Fatalf("described %d instances", len(ids))
	}
	term, err := client.TerminateInstances(ctx(t), &ec2.TerminateInstancesInput{InstanceIds: ids})
	if err != nil || len(term.TerminatingInstances) != 2 || term.TerminatingInstances[0].CurrentState.Name != ec2types.InstanceStateNameShuttingDown {
		t.Fatalf("terminate = %+v, %v", term, err)
	}
	for _, inst := range e.EC2.Instances() {
		if inst.TerminatedAt.IsZero() || inst.TerminatedAt.Before(inst.LaunchTime) {
			t.Errorf("instance %s: terminated at %v, launched %v; want the termination's time", inst.ID, inst.TerminatedAt, inst.LaunchTime)
		}
	}
	_, err = client.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0000000000000dead"}})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidInstanceID.NotFound" {
		t.Fatalf("describing a missing instance: %v", err)
	}
}

func TestDescribeInstanceTypesPaginatesAndPricesAreServed(t *testing.T) {
	e := startEmulator(t)
	client := ec2.NewFromConfig(sdkConfig(e))
	pages := 0
	n := 0
	p := ec2.NewDescribeInstanceTypesPaginator(client, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(50)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		pages++
		n += len(out.InstanceTypes)
	}
	if n != len(e.EC2.instanceTypes) || pages < 2 {
		t.Fatalf("%d types in %d pages, want %d in several", n, pages, len(e.EC2.instanceTypes))
	}
	spot, err := client.DescribeSpotPriceHistory(ctx(t), &ec2.DescribeSpotPriceHistoryInput{InstanceTypes: []ec2types.InstanceType{"m5.large"},
		ProductDescriptions: []string{"Linux/UNIX"}})
	if err != nil || len(spot.SpotPriceHistory) != 3 {
		t.Fatalf("spot prices = %+v, %v", spot, err)
	}
	pc := pricingsdk.NewFromConfig(sdkConfig(e))
	prices, err := pc.GetProducts(ctx(t), &pricingsdk.GetProductsInput{ServiceCode: aws.String("AmazonEC2"), Filters: []pricingtypes.Filter{
		{Field: aws.String("regionCode"), Type: pricingtypes.FilterTypeTermMatch, Value: aws.String("us-east-1")}}})
	if err != nil || len(prices.PriceList) == 0 {
		t.Fatalf("GetProducts = %v", err)
	}
	ssmc := ssm.NewFromConfig(sdkConfig(e))
	param, err := ssmc.GetParameter(ctx(t), &ssm.GetParameterInput{Name: aws.String("/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/arm64/standard/recommended/image_id")})
	if err != nil || aws.ToString(param.Parameter.Value) == "" {
		t.Fatalf("GetParameter = %v", err)
	}
}

func TestSQSLongPollWakesOnSendAndMissingQueuesAreTyped(t *testing.T) {
	e := startEmulator(t)
	client := sqs.NewFromConfig(sdkConfig(e))
	created, err := client.CreateQueue(ctx(t), &sqs.CreateQueueInput{QueueName: aws.String("interruptions")})
	if err != nil {
		t.Fatal(err)
	}
	url := created.QueueUrl
	received := make(chan *sqs.ReceiveMessageOutput, 1)
	go func() {
		out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: url, WaitTimeSeconds: 20, MaxNumberOfMessages: 10})
		if err != nil {
			t.Error(err)
		}
		received <- out
	}()
	if _, err := client.SendMessage(ctx(t), &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String(`{"detail-type":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	select {
	case out := <-received:
		if len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != `{"detail-type":"x"}` {
			t.Fatalf("received %+v", out.Messages)
		}
		if _, err := client.DeleteMessage(ctx(t), &sqs.DeleteMessageInput{QueueUrl: url, ReceiptHandle: out.Messages[0].ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the long poll did not wake when a message was sent")
	}
	_, err = client.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: aws.String(e.URL() + "/111122223333/missing")})
	var missing *sqstypes.QueueDoesNotExist
	if !errors.As(err, &missing) {
		t.Fatalf("receiving from a missing queue: %v, want QueueDoesNotExist", err)
	}
}

func TestInjectedFaultsAreAnsweredAsAWSWould(t *testing.T) {
	e := startEmulator(t)
	e.InjectFault(Fault{Action: "DescribeSubnets", Code: "RequestLimitExceeded", Times: 1})
	client := ec2.NewFromConfig(sdkConfig(e), func(o *ec2.Options) { o.RetryMaxAttempts = 1 })
	_, err := client.DescribeSubnets(ctx(t), &ec2.DescribeSubnetsInput{})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "RequestLimitExceeded" {
		t.Fatalf("first call: %v, want RequestLimitExceeded", err)
	}
	if _, err := client.DescribeSubnets(ctx(t), &ec2.DescribeSubnetsInput{}); err != nil {
		t.Fatalf("the fault was injected once: %v", err)
	}
}

func TestCreateFleetWithMinTargetCapacityLaunchesAllOrNothing(t *testing.T) {
	e := startEmulator(t)
	client := ec2.NewFromConfig(sdkConfig(e))
	launchTemplate(t, client, "lt")
	subnets := discoverySubnets(t, client)
	zoneOf := map[string]string{}
	for _, s := range subnets {
		zoneOf[aws.ToString(s.SubnetId)] = aws.ToString(s.AvailabilityZone)
	}
	subnetA, subnetB := aws.ToString(subnets[0].SubnetId), aws.ToString(subnets[1].SubnetId)
	e.EC2.SetCapacity("m5.xlarge", zoneOf[subnetA], "on-demand", 3)
	fleet := func(minTarget int32, single bool, subnets ...string) (*ec2.CreateFleetOutput, error) {
		var overrides []ec2types.FleetLaunchTemplateOverridesRequest
		for _, s := range subnets {
			overrides = append(overrides, ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: "m5.xlarge", SubnetId: aws.String(s)})
		}
		return client.CreateFleet(ctx(t), &ec2.CreateFleetInput{
			Type: ec2types.FleetTypeInstant,
			LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
				LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("lt"), Version: aws.String("$Latest")},
				Overrides:                   overrides,
			}},
			TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(4),
				DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
			OnDemandOptions: &ec2types.OnDemandOptionsRequest{MinTargetCapacity: aws.Int32(minTarget), SingleAvailabilityZone: aws.Bool(single)},
		})
	}
	launched := func(out *ec2.CreateFleetOutput) map[string]int {
		zones := map[string]int{}
		for _, inst := range out.Instances {
			zones[aws.ToString(inst.LaunchTemplateAndOverrides.Overrides.SubnetId)] += len(inst.InstanceIds)
		}
		return zones
	}

	// room for 3 of 4 in the only zone asked: nothing launched, the pool in the errors
	out, err := fleet(4, true, subnetA)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) != 0 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "InsufficientInstanceCapacity" {
		t.Fatalf("instances %+v, errors %+v; want none launched and one InsufficientInstanceCapacity", out.Instances, out.Errors)
	}
	if n := len(e.EC2.Instances()); n != 0 {
		t.Fatalf("%d instances exist, want none", n)
	}
	// the first zone that can take all 4
	out, err = fleet(4, true, subnetA, subnetB)
	if err != nil {
		t.Fatal(err)
	}
	if got := launched(out); got[subnetB] != 4 || len(got) != 1 {
		t.Fatalf("launched by subnet %v, want 4 in %s (zone %s), none in the zone with room for 3", got, subnetB, zoneOf[subnetB])
	}
	// the 3 left are still there: a fleet asking at least 3 launches them
	out, err = fleet(3, true, subnetA)
	if err != nil {
		t.Fatal(err)
	}
	if got := launched(out); got[subnetA] != 3 {
		t.Fatalf("launched by subnet %v, want the 3 left in %s", got, subnetA)
	}
	// EC2 refuses MinTargetCapacity without one type or one zone
	if _, err := fleet(2, false, subnetA); err == nil || !strings.Contains(err.Error(), "InvalidParameterCombination") {
		t.Fatalf("err = %v, want InvalidParameterCombination", err)
	}
}
