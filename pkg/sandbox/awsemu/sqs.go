/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package awsemu

import (
	"context"
	"crypto/md5" //nolint:gosec // G501: SQS's protocol sends the MD5 of each message body, which the SDK checks
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"k8s.io/utils/clock"
)

// SQS is the emulated SQS service, speaking the AWS JSON 1.0 protocol the SDK uses.
type SQS struct {
	baseURL   string
	accountID string
	clock     clock.PassiveClock

	mu     sync.Mutex
	queues map[string]*queue // by name
	calls  map[string]int
}

type queue struct {
	name              string
	visibilityTimeout time.Duration
	messages          []*message
	// arrived is closed and replaced whenever a message is sent, waking long polls.
	arrived chan struct{}
}

type message struct {
	id, body, md5 string
	sent          time.Time
	receiveCount  int
	invisibleTill time.Time
	receipt       string
}

func newSQS(accountID string, clk clock.PassiveClock) *SQS {
	return &SQS{accountID: accountID, clock: clk, queues: map[string]*queue{}, calls: map[string]int{}}
}

// CreateQueue creates a queue (idempotently) and returns its URL.
func (s *SQS) CreateQueue(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.queues[name]; !ok {
		s.queues[name] = &queue{name: name, visibilityTimeout: 30 * time.Second, arrived: make(chan struct{})}
	}
	return s.url(name)
}

func (s *SQS) url(name string) string { return fmt.Sprintf("%s/%s/%s", s.baseURL, s.accountID, name) }

// queueByURL finds a queue from a queue URL (or a bare name). Caller holds s.mu.
func (s *SQS) queueByURL(u string) *queue {
	name := u[strings.LastIndex(u, "/")+1:]
	return s.queues[name]
}

// Send enqueues a message body and returns its id.
func (s *SQS) Send(queueURL, body string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queueByURL(queueURL)
	if q == nil {
		return "", fmt.Errorf("queue %s does not exist", queueURL)
	}
	return s.enqueue(q, body), nil
}

// enqueue adds a message and wakes long polls. Caller holds s.mu.
func (s *SQS) enqueue(q *queue, body string) string {
	sum := md5.Sum([]byte(body)) //nolint:gosec // G401: SQS's protocol requires the MD5 of the message body (MD5OfBody)
	m := &message{id: uuid.NewString(), body: body, md5: hex.EncodeToString(sum[:]), sent: s.clock.Now()}
	q.messages = append(q.messages, m)
	close(q.arrived)
	q.arrived = make(chan struct{})
	return m.id
}

// Depth returns the number of messages in a queue (visible or not).
func (s *SQS) Depth(queueURL string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.queueByURL(queueURL); q != nil {
		return len(q.messages)
	}
	return 0
}

// Calls returns how many requests of each action the emulator served.
func (s *SQS) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneCounts(s.calls)
}

//nolint:gocyclo // a dispatch table: one case per SQS action the emulator serves
func (s *SQS) handle(w http.ResponseWriter, r *http.Request, action string, body []byte) {
	s.mu.Lock()
	s.calls[action]++
	s.mu.Unlock()
	var in map[string]any
	if err := json.Unmarshal(body, &in); err != nil {
		writeJSONError(w, http.StatusBadRequest, "com.amazonaws.sqs#InvalidParameterValue", "AWS.SimpleQueueService.InvalidParameterValue", "request body is not JSON: "+err.Error())
		return
	}
	str := func(k string) string { v, _ := in[k].(string); return v }
	num := func(k string, def int) int {
		if v, ok := in[k].(float64); ok {
			return int(v)
		}
		return def
	}
	switch action {
	case "CreateQueue":
		writeJSON(w, "1.0", map[string]any{"QueueUrl": s.CreateQueue(str("QueueName"))})
	case "GetQueueUrl":
		s.mu.Lock()
		_, ok := s.queues[str("QueueName")]
		s.mu.Unlock()
		if !ok {
			writeQueueDoesNotExist(w)
			return
		}
		writeJSON(w, "1.0", map[string]any{"QueueUrl": s.url(str("QueueName"))})
	case "GetQueueAttributes":
		s.mu.Lock()
		q := s.queueByURL(str("QueueUrl"))
		var n int
		if q != nil {
			n = len(q.messages)
		}
		s.mu.Unlock()
		if q == nil {
			writeQueueDoesNotExist(w)
			return
		}
		writeJSON(w, "1.0", map[string]any{"Attributes": map[string]string{
			"ApproximateNumberOfMessages": strconv.Itoa(n), "QueueArn": "arn:aws:sqs:emulated:" + s.accountID + ":" + q.name,
			"MessageRetentionPeriod": "300", "VisibilityTimeout": strconv.Itoa(int(q.visibilityTimeout.Seconds()))}})
	case "SendMessage":
		s.mu.Lock()
		q := s.queueByURL(str("QueueUrl"))
		var id, sum string
		if q != nil {
			id = s.enqueue(q, str("MessageBody"))
			sum = q.messages[len(q.messages)-1].md5
		}
		s.mu.Unlock()
		if q == nil {
			writeQueueDoesNotExist(w)
			return
		}
		writeJSON(w, "1.0", map[string]any{"MessageId": id, "MD5OfMessageBody": sum})
	case "ReceiveMessage":
		s.receive(r.Context(), w, str("QueueUrl"), num("MaxNumberOfMessages", 1), num("WaitTimeSeconds", 0), num("VisibilityTimeout", -1))
	case "DeleteMessage":
		s.mu.Lock()
		q := s.queueByURL(str("QueueUrl"))
		ok := q != nil && s.deleteByReceipt(q, str("ReceiptHandle"))
		s.mu.Unlock()
		switch {
		case q == nil:
			writeQueueDoesNotExist(w)
		case !ok:
			writeJSONError(w, http.StatusBadRequest, "com.amazonaws.sqs#ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", "the receipt handle is not valid")
		default:
			writeJSON(w, "1.0", map[string]any{})
		}
	default:
		writeJSONError(w, http.StatusBadRequest, "com.amazonaws.sqs#InvalidAction", "InvalidAction", "the action "+action+" is not valid for this endpoint")
	}
}

// deleteByReceipt removes the message last received with receipt. Caller holds s.mu.
func (s *SQS) deleteByReceipt(q *queue, receipt string) bool {
	for i, m := range q.messages {
		if m.receipt == receipt && receipt != "" {
			q.messages = append(q.messages[:i], q.messages[i+1:]...)
			return true
		}
	}
	return false
}

// receive returns up to max visible messages, waiting up to wait seconds for one to arrive (long polling that
// wakes as soon as a message is sent).
func (s *SQS) receive(ctx context.Context, w http.ResponseWriter, queueURL string, maxMessages, wait, visibility int) {
	if maxMessages < 1 || maxMessages > 10 {
		writeJSONError(w, http.StatusBadRequest, "com.amazonaws.sqs#InvalidParameterValue", codeInvalidParameterValue, "MaxNumberOfMessages must be between 1 and 10")
		return
	}
	deadline := time.Now().Add(time.Duration(wait) * time.Second)
	for {
		s.mu.Lock()
		q := s.queueByURL(queueURL)
		if q == nil {
			s.mu.Unlock()
			writeQueueDoesNotExist(w)
			return
		}
		now := s.clock.Now()
		vis := q.visibilityTimeout
		if visibility >= 0 {
			vis = time.Duration(visibility) * time.Second
		}
		var out []map[string]any
		for _, m := range q.messages {
			if len(out) == maxMessages {
				break
			}
			if now.Before(m.invisibleTill) {
				continue
			}
			m.receiveCount++
			m.invisibleTill = now.Add(vis)
			m.receipt = uuid.NewString()
			out = append(out, map[string]any{"MessageId": m.id, "ReceiptHandle": m.receipt, "MD5OfBody": m.md5, "Body": m.body,
				"Attributes": map[string]string{"ApproximateReceiveCount": strconv.Itoa(m.receiveCount),
					"SentTimestamp": strconv.FormatInt(m.sent.UnixMilli(), 10)}})
		}
		arrived := q.arrived
		s.mu.Unlock()
		remaining := time.Until(deadline)
		if len(out) > 0 || remaining <= 0 {
			writeJSON(w, "1.0", map[string]any{"Messages": out})
			return
		}
		timer := time.NewTimer(min(remaining, time.Second)) // also re-checks messages whose visibility ended
		select {
		case <-arrived:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return
		}
		timer.Stop()
	}
}

func writeQueueDoesNotExist(w http.ResponseWriter) {
	writeJSONError(w, http.StatusBadRequest, "com.amazonaws.sqs#QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue",
		"The specified queue does not exist.")
}
