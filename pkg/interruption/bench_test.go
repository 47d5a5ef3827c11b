/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package interruption

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/stevedore-dev/stevedore/pkg/apis/config"
	"github.com/stevedore-dev/stevedore/pkg/disruption"
	"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu"
	"github.com/stevedore-dev/stevedore/pkg/test"
)

// nopInterrupter stands in for the disruption controller: the benchmark measures the poller, not the drain.
type nopInterrupter struct{}

func (nopInterrupter) Interrupt(context.Context, disruption.InterruptRequest) error { return nil }

// BenchmarkPollMessages measures messages handled per second end to end over the SQS wire protocol: the emulator's
// queue holds b.N messages (spot warnings for 1000 managed instances, rebalance recommendations, state changes,
// unknown instances and malformed bodies, in turn) and the poller receives, parses, acts on and deletes them.
func BenchmarkPollMessages(b *testing.B) {
	emu, err := awsemu.Start(awsemu.Options{ClusterName: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer emu.Stop()
	url := emu.SQS.CreateQueue("bench-interruptions")
	client := sqs.NewFromConfig(aws.Config{Region: emu.Region(), Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")},
		func(o *sqs.Options) { o.BaseEndpoint = aws.String(emu.URL()) })
	claims := make([]runtime.Object, 1000)
	for i := range claims {
		claims[i] = test.NodeClaim(fmt.Sprintf("claim-%d", i), "default").
			Launched(fmt.Sprintf("node-%d", i), "m7g.large", "us-east-1a", "spot", "0.0300").InstanceID(fmt.Sprintf("i-%017x", i)).Obj()
	}
	l, err := test.NewListers(claims...)
	if err != nil {
		b.Fatal(err)
	}
	c := New(Options{Args: config.ProvisionerArgs{InterruptionQueue: url}, Queue: client, NodeClaims: l.NodeClaims, Interrupter: nopInterrupter{},
		WaitTime: time.Second})
	now := time.Now().UTC().Format(time.RFC3339)
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("i-%017x", i%1000)
		var body string
		switch i % 5 {
		case 0:
			body = `{"version":"0","id":"a","source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","time":"` + now + `","detail":{"instance-id":"` + id + `","instance-action":"terminate"}}`
		case 1:
			body = `{"version":"0","id":"b","source":"aws.ec2","detail-type":"EC2 Instance Rebalance Recommendation","time":"` + now + `","detail":{"instance-id":"` + id + `"}}`
		case 2:
			body = `{"version":"0","id":"c","source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","time":"` + now + `","detail":{"instance-id":"` + id + `","state":"stopping"}}`
		case 3:
			body = `{"version":"0","id":"d","source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","time":"` + now + `","detail":{"instance-id":"i-0fffffffffffffff0"}}`
		default:
			body = "not an event"
		}
		if _, err := emu.SQS.Send(url, body); err != nil {
			b.Fatal(err)
		}
	}
	// the per-message log lines would interleave with the benchmark's output
	ctx := klog.NewContext(context.Background(), logr.Discard())
	b.ResetTimer()
	start := time.Now()
	for emu.SQS.Depth(url) > 0 {
		if err := c.poll(ctx, url); err != nil {
			b.Fatal(err)
		}
	}
	c.wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "messages/s")
}
