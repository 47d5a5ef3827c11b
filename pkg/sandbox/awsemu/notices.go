/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package awsemu

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Notice kinds the emulator can send, as EventBridge would deliver them to the interruption queue.
const (
	NoticeSpot      = "spot"
	NoticeRebalance = "rebalance"
	NoticeStop      = "stop"
	NoticeScheduled = "scheduled"
)

// NoticeKinds lists the kinds Notify accepts.
var NoticeKinds = []string{NoticeSpot, NoticeRebalance, NoticeStop, NoticeScheduled}

// DefaultSpotNotice is AWS's warning time before a spot instance is reclaimed.
const DefaultSpotNotice = 2 * time.Minute

// Fields of the detail of the EC2 events about an instance.
const (
	detailInstanceID = "instance-id"
	detailState      = "state"
)

// eventEnvelope is an EventBridge event.
type eventEnvelope struct {
	Version    string   `json:"version"`
	ID         string   `json:"id"`
	DetailType string   `json:"detail-type"`
	Source     string   `json:"source"`
	Account    string   `json:"account"`
	Time       string   `json:"time"`
	Region     string   `json:"region"`
	Resources  []string `json:"resources"`
	Detail     any      `json:"detail"`
}

// Notify sends to the queue the event AWS sends for kind about an instance, then does what AWS does next: a spot
// instance is terminated notice after the warning (DefaultSpotNotice if notice is 0), a stopped instance stops.
// Rebalance recommendations and scheduled changes take nothing away.
func (e *Emulator) Notify(queueURL, kind, instanceID string, notice time.Duration) error {
	inst := e.EC2.Instance(instanceID)
	if inst == nil {
		return fmt.Errorf("instance %s does not exist", instanceID)
	}
	if inst.State != stateRunning {
		return fmt.Errorf("instance %s is %s, not running", instanceID, inst.State)
	}
	if notice == 0 {
		notice = DefaultSpotNotice
	}
	arn := fmt.Sprintf("arn:%s:ec2:%s:%s:instance/%s", e.EC2.partition, e.region, e.SQS.accountID, instanceID)
	var env eventEnvelope
	switch kind {
	case NoticeSpot:
		if inst.CapacityType != capacityTypeSpot {
			return fmt.Errorf("instance %s is %s, not spot", instanceID, inst.CapacityType)
		}
		env = e.event("aws.ec2", "EC2 Spot Instance Interruption Warning", arn,
			map[string]string{detailInstanceID: instanceID, "instance-action": "terminate"})
	case NoticeRebalance:
		env = e.event("aws.ec2", "EC2 Instance Rebalance Recommendation", arn, map[string]string{detailInstanceID: instanceID})
	case NoticeStop:
		env = e.event("aws.ec2", "EC2 Instance State-change Notification", arn, map[string]string{detailInstanceID: instanceID, detailState: stateStopping})
	case NoticeScheduled:
		env = e.event("aws.health", "AWS Health Event", "", map[string]any{
			"eventArn": "arn:" + e.EC2.partition + ":health:" + e.region + "::event/EC2/EC2_INSTANCE_RETIREMENT_SCHEDULED/" + instanceID, "service": "EC2",
			"eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", "eventTypeCategory": "scheduledChange",
			"startTime":        e.EC2.clock.Now().Add(14 * 24 * time.Hour).UTC().Format(time.RFC1123),
			"affectedEntities": []map[string]string{{"entityValue": instanceID}},
		})
	default:
		return fmt.Errorf("unknown notice kind %q (want one of %s)", kind, strings.Join(NoticeKinds, ", "))
	}
	if err := e.send(queueURL, env); err != nil {
		return err
	}
	switch kind {
	case NoticeSpot:
		e.EC2.clock.AfterFunc(notice, func() {
			if err := e.EC2.Interrupt(instanceID, "Server.SpotInstanceTermination: Spot instance termination"); err == nil {
				_ = e.send(queueURL, e.event("aws.ec2", "EC2 Instance State-change Notification", arn,
					map[string]string{detailInstanceID: instanceID, detailState: stateShuttingDown}))
			}
		})
	case NoticeStop:
		e.EC2.stop(instanceID)
	}
	return nil
}

func (e *Emulator) event(source, detailType, resource string, detail any) eventEnvelope {
	env := eventEnvelope{Version: "0", ID: uuid.NewString(), DetailType: detailType, Source: source, Account: e.SQS.accountID,
		Time: e.EC2.clock.Now().UTC().Format(time.RFC3339), Region: e.region, Resources: []string{}, Detail: detail}
	if resource != "" {
		env.Resources = []string{resource}
	}
	return env
}

func (e *Emulator) send(queueURL string, env eventEnvelope) error {
	body, err := json.Marshal(env)
	if err != nil {
		return err
	}
	_, err = e.SQS.Send(queueURL, string(body))
	return err
}

// InstanceByNodeName returns the running instance whose node has this name (its private DNS name), or nil.
func (e *EC2) InstanceByNodeName(name string) *Instance {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range e.order {
		if inst := e.instances[id]; inst.PrivateDNSName == name && inst.State == stateRunning {
			return inst.clone()
		}
	}
	return nil
}

// stop moves an instance to stopping, then stopped.
func (e *EC2) stop(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	inst := e.instances[id]
	if inst == nil || inst.State != stateRunning {
		return
	}
	inst.State = stateStopping
	e.clock.AfterFunc(e.shuttingDownDuration, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if inst := e.instances[id]; inst != nil && inst.State == stateStopping {
			inst.State = stateStopped
		}
	})
}

// serveControl answers the emulator's own control API (not AWS's): POST /_emulator/notify with the form fields
// queue, kind, node or instance, and notice (a duration), as `scheduler sandbox interrupt` sends it.
func (e *Emulator) serveControl(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/_emulator/notify" {
		http.Error(w, "only POST /_emulator/notify", http.StatusNotFound)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	id := r.Form.Get("instance")
	if node := r.Form.Get("node"); id == "" && node != "" {
		inst := e.EC2.InstanceByNodeName(node)
		if inst == nil {
			http.Error(w, "no running instance has the node name "+node, http.StatusNotFound)
			return
		}
		id = inst.ID
	}
	var notice time.Duration
	if s := r.Form.Get("notice"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			http.Error(w, "notice: "+err.Error(), http.StatusBadRequest)
			return
		}
		notice = d
	}
	if err := e.Notify(r.Form.Get("queue"), r.Form.Get("kind"), id, notice); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	fmt.Fprintf(w, "sent a %s notice for %s\n", r.Form.Get("kind"), id) //nolint:gosec // G705: plain text (nosniff), naming a kind and an instance Notify has just accepted as known ones
}
