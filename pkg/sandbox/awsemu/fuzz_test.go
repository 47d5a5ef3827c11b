/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package awsemu

import (
	"encoding/json"
	"encoding/xml"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// FuzzRequest sends the emulator arbitrary signed requests, in the EC2 query protocol (a form body) and the JSON
// protocol (an X-Amz-Target header), as the SDK and anything else on the machine could: it must answer each
// with a status and a body in the protocol's error shape, and never panic or hang.
func FuzzRequest(f *testing.F) {
	f.Add("", "Action=DescribeInstances&Version=2016-11-15")
	f.Add("", "Action=CreateFleet&Type=instant&TargetCapacitySpecification.TotalTargetCapacity=2&TargetCapacitySpecification.DefaultTargetCapacityType=spot&LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName=x&LaunchTemplateConfigs.1.Overrides.1.InstanceType=m5.large")
	f.Add("", "Action=TerminateInstances&InstanceId.1=i-1")
	f.Add("", "Action=DescribeInstanceTypes&MaxResults=5&NextToken=abc")
	f.Add("", "Action=DescribeInstanceTypes&MaxResults=5&NextToken=-5")
	f.Add("", "Action=DescribeInstanceTypes&MaxResults=9223372036854775807&NextToken=1")
	f.Add("AWSPriceListService.GetProducts", `{"ServiceCode":"AmazonEC2","MaxResults":1,"NextToken":"-3"}`)
	f.Add("", "Action=CreateTags&ResourceId.1=i-1&Tag.1.Key=a&Tag.1.Value=b")
	f.Add("", "Action=DescribeInstances&Filter.1.Name=tag:x&Filter.1.Value.1=y")
	f.Add("", "%zz")
	f.Add("AmazonSQS.ReceiveMessage", `{"QueueUrl":"http://x/1/q","WaitTimeSeconds":0}`)
	f.Add("AmazonSQS.SendMessage", `{"QueueUrl":"http://x/1/q","MessageBody":"b"}`)
	f.Add("AmazonSSM.GetParameter", `{"Name":"/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/standard/recommended/image_id"}`)
	f.Add("AWSPriceListService.GetProducts", `{"ServiceCode":"AmazonEC2","MaxResults":1}`)
	f.Add("AmazonSQS.DeleteMessage", `not json`)
	e, err := Start(Options{ClusterName: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(e.Stop)
	f.Fuzz(func(t *testing.T, target, body string) {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKID/20261126/us-east-1/ec2/aws4_request")
		if target != "" {
			r.Header.Set("X-Amz-Target", target)
		}
		w := httptest.NewRecorder()
		e.ServeHTTP(w, r)
		if w.Code < 200 || w.Code > 599 {
			t.Fatalf("status %d", w.Code)
		}
		if w.Code == http.StatusOK {
			return
		}
		if target != "" {
			var out struct {
				Type string `json:"__type"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Type == "" {
				t.Fatalf("JSON-protocol error %d is not {\"__type\": ...}: %q (%v)", w.Code, w.Body.String(), err)
			}
			return
		}
		var out struct {
			Errors struct {
				Error []struct {
					Code string
				}
			}
		}
		if err := xml.Unmarshal(w.Body.Bytes(), &out); err != nil || len(out.Errors.Error) == 0 || out.Errors.Error[0].Code == "" {
			t.Fatalf("EC2 error %d is not <Response><Errors><Error><Code>: %q (%v)", w.Code, w.Body.String(), err)
		}
	})
}

// TestTheEmulatorListensOnLoopbackOnly: nothing off the machine can reach the emulated AWS.
func TestTheEmulatorListensOnLoopbackOnly(t *testing.T) {
	e := startEmulator(t)
	u, err := url.Parse(e.URL())
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		t.Fatalf("emulator URL %s, want a loopback address", e.URL())
	}
}
