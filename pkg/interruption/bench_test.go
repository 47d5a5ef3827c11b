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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	stevedorev1 "github.com/stevedore-dev/stevedore/pkg/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/disruption"
	listers "github.com/stevedore-dev/stevedore/pkg/generated/listers/apis/v1"
	"github.com/stevedore-dev/stevedore/pkg/sandbox/awsemu"
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
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for i := 0; i < 1000; i++ {
		_ = indexer.Add(&stevedorev1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("claim-%d", i)},
			Status: stevedorev1.NodeClaimStatus{InstanceID: fmt.Sprintf("i-%017x", i), InstanceType: "m7g.large", Zone: "us-east-1a"}})
	}
	c := New(Options{Queue: client, QueueURL: url, NodeClaims: listers.NewNodeClaimLister(indexer), Interrupter: nopInterrupter{},
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
