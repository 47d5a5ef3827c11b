/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// policyStatement is the part of an IAM policy statement the test reads.
type policyStatement struct {
	Sid       string
	Effect    string
	Action    stringOrList
	Resource  stringOrList
	Condition map[string]map[string]any
}

type stringOrList []string

func (s *stringOrList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = []string{one}
		return nil
	}
	var many []string
	err := json.Unmarshal(b, &many)
	*s = many
	return err
}

// impliedActions are the permissions AWS checks for calls that do more than their name: CreateFleet launches
// instances (RunInstances) with the node role (PassRole), tagging them on creation (CreateTags).
var impliedActions = []string{"ec2:RunInstances", "ec2:CreateTags", "iam:PassRole"}

// calledActions scans the code that talks to AWS (this package and the interruption poller) for the SDK inputs it
// builds: each <service>.<Operation>Input is one action it calls.
func calledActions(t *testing.T) map[string]bool {
	t.Helper()
	input := regexp.MustCompile(`\b(ec2|sqs|ssm|pricing|eks|iam)\.([A-Z][A-Za-z]+)Input\b`)
	out := map[string]bool{}
	for _, dir := range []string{".", "../../interruption"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range input.FindAllStringSubmatch(string(src), -1) {
				out[m[1]+":"+m[2]] = true
			}
		}
	}
	for _, a := range impliedActions {
		out[a] = true
	}
	return out
}

// TestControllerPolicyAllowsExactlyWhatTheCodeCalls: every AWS action the code calls is allowed by
// deploy/iam/stevedore-controller-policy.json, nothing else is, no wildcard action is granted, and every
// statement that creates, tags, terminates or passes a role is narrowed by resource or condition.
func TestControllerPolicyAllowsExactlyWhatTheCodeCalls(t *testing.T) {
	policy := readPolicy(t)
	called := calledActions(t)
	if len(called) < 15 {
		t.Fatalf("found only %d actions in the code; the scan is broken: %v", len(called), called)
	}
	allowed := map[string]bool{}
	for _, st := range policy.Statement {
		if st.Effect != "Allow" {
			continue
		}
		for _, a := range st.Action {
			if strings.Contains(a, "*") {
				t.Errorf("statement %s grants the wildcard action %s", st.Sid, a)
			}
			allowed[a] = true
			mutating := !strings.Contains(a, ":Describe") && !strings.Contains(a, ":Get") && a != "sqs:ReceiveMessage" && a != "sqs:DeleteMessage"
			if mutating && len(st.Condition) == 0 {
				for _, r := range st.Resource {
					if r == "*" || strings.HasSuffix(r, ":*") {
						t.Errorf("statement %s grants %s on %s without a condition", st.Sid, a, r)
					}
				}
			}
		}
	}
	var missing, extra []string
	for a := range called {
		if !allowed[a] {
			missing = append(missing, a)
		}
	}
	for a := range allowed {
		if !called[a] {
			extra = append(extra, a)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("the code calls actions the policy does not allow: %v", missing)
	}
	if len(extra) > 0 {
		t.Errorf("the policy allows actions the code never calls: %v", extra)
	}
}

// TestTheCreateRequestsCarryTheTagsThePolicyRequires launches an instance and checks each create request's tags
// (CreateLaunchTemplate, CreateFleet) against the aws:RequestTag conditions of the policy's statements that allow
// it on the resource it creates: one statement must be satisfied, or AWS refuses the call.
func TestTheCreateRequestsCarryTheTagsThePolicyRequires(t *testing.T) {
	policy := readPolicy(t)
	f := newFixture(t, nil)
	if _, err := f.provider.Create(testCtx(t), claim("nc-1", in("node.kubernetes.io/instance-type", "m5.large"))); err != nil {
		t.Fatal(err)
	}
	var templateTags map[string]string
	for _, tc := range []struct{ action, resourceType, resource string }{
		{"CreateLaunchTemplate", "launch-template", "launch-template/*"},
		{"CreateFleet", "fleet", "fleet/*"},
		{"CreateFleet", "instance", "instance/*"},
	} {
		req := f.emu.EC2.LastRequest(tc.action)
		tags := map[string]string{}
		for i := 1; req.Get(fmt.Sprintf("TagSpecification.%d.ResourceType", i)) != ""; i++ {
			if req.Get(fmt.Sprintf("TagSpecification.%d.ResourceType", i)) != tc.resourceType {
				continue
			}
			for j := 1; req.Get(fmt.Sprintf("TagSpecification.%d.Tag.%d.Key", i, j)) != ""; j++ {
				tags[req.Get(fmt.Sprintf("TagSpecification.%d.Tag.%d.Key", i, j))] = req.Get(fmt.Sprintf("TagSpecification.%d.Tag.%d.Value", i, j))
			}
		}
		var tried []string
		satisfied := false
		for _, st := range policy.Statement {
			if !slices.Contains(st.Action, "ec2:"+tc.action) || !slices.ContainsFunc(st.Resource, func(r string) bool { return strings.HasSuffix(r, ":"+tc.resource) }) {
				continue
			}
			tried = append(tried, st.Sid)
			if requestTagsSatisfy(st.Condition, tags) {
				satisfied = true
			}
		}
		if !satisfied {
			t.Errorf("%s of a %s carries tags %v, which satisfy none of the statements allowing it (%v)", tc.action, tc.resourceType, tags, tried)
		}
		if tc.resourceType == "launch-template" {
			templateTags = tags
		}
	}
	// a fleet launches only from the cluster's own launch templates: every statement letting CreateFleet or
	// RunInstances use one requires the cluster's tag on it, which the templates Stevedore creates carry
	for _, st := range policy.Statement {
		if !slices.ContainsFunc(st.Resource, func(r string) bool { return strings.HasSuffix(r, ":launch-template/*") }) ||
			(!slices.Contains(st.Action, "ec2:CreateFleet") && !slices.Contains(st.Action, "ec2:RunInstances")) {
			continue
		}
		if _, scoped := st.Condition["StringEquals"]["aws:ResourceTag/kubernetes.io/cluster/${CLUSTER_NAME}"]; !scoped {
			t.Errorf("statement %s lets a launch use any launch template in the region, not only the cluster's", st.Sid)
		}
		if !tagsSatisfy(st.Condition, "aws:ResourceTag/", templateTags) {
			t.Errorf("statement %s refuses the launch template Stevedore created (tags %v)", st.Sid, templateTags)
		}
	}
}

// requestTagsSatisfy evaluates the aws:RequestTag conditions of a statement (StringEquals, and StringLike with
// "*" as "present") on a request's tags; the policy's ${CLUSTER_NAME} is the test cluster's.
func requestTagsSatisfy(conditions map[string]map[string]any, tags map[string]string) bool {
	return tagsSatisfy(conditions, "aws:RequestTag/", tags)
}

// tagsSatisfy evaluates a statement's conditions on the tag keys under prefix (aws:RequestTag/ or
// aws:ResourceTag/) against tags.
func tagsSatisfy(conditions map[string]map[string]any, prefix string, tags map[string]string) bool {
	for op, keys := range conditions {
		for key, want := range keys {
			tag, ok := strings.CutPrefix(key, prefix)
			if !ok {
				continue
			}
			got, present := tags[strings.ReplaceAll(tag, "${CLUSTER_NAME}", testCluster)]
			switch {
			case !present:
				return false
			case op == "StringEquals" && want != got:
				return false
			case op == "StringLike" && want != "*" && want != got:
				return false
			}
		}
	}
	return true
}

// TestThePolicysConditionKeysApplyToTheirActions: every condition key of every conditional statement of the
// controller policy is one the AWS Service Authorization Reference lists for each action of the statement (on the
// action's row or one of its resource types' rows, testdata/condition-keys.json), or a global key. AWS ignores a
// condition on a key its action does not support, and a statement then allows more (or, for a Deny, less) than
// it says; no emulator evaluates conditions, so this is checked against the reference.
func TestThePolicysConditionKeysApplyToTheirActions(t *testing.T) {
	policy := readPolicy(t)
	raw, err := os.ReadFile(filepath.Join("testdata", "condition-keys.json"))
	if err != nil {
		t.Fatal(err)
	}
	var reference struct {
		Global  []string
		Actions map[string][]string
	}
	if err := json.Unmarshal(raw, &reference); err != nil {
		t.Fatal(err)
	}
	// a tag key in a condition key stands for the reference's ${TagKey}
	tagged := regexp.MustCompile(`^((aws|ec2|iam):(RequestTag|ResourceTag))/.+$`)
	checked := 0
	for _, st := range policy.Statement {
		for _, keys := range st.Condition {
			for key := range keys {
				generic := tagged.ReplaceAllString(key, "$1/$${TagKey}")
				for _, action := range st.Action {
					supported, known := reference.Actions[action]
					switch {
					case !known:
						t.Errorf("statement %s: action %s has conditions, but testdata/condition-keys.json has no entry for it: add the keys the reference lists",
							st.Sid, action)
					case !slices.Contains(supported, generic) && !slices.Contains(reference.Global, generic):
						t.Errorf("statement %s: condition key %s does not apply to %s (the reference lists %v)", st.Sid, key, action, supported)
					}
					checked++
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked only %d action and key pairs; the policy's conditions were not read", checked)
	}
	t.Logf("%d action and condition key pairs, each supported by its action", checked)
}

// shippedPolicy is the controller policy as deploy/iam ships it.
type shippedPolicy struct {
	Version   string
	Statement []policyStatement
}

// readPolicy reads deploy/iam/stevedore-controller-policy.json.
func readPolicy(t *testing.T) shippedPolicy {
	t.Helper()
	raw, err := os.ReadFile("../../../deploy/iam/stevedore-controller-policy.json")
	if err != nil {
		t.Fatal(err)
	}
	var policy shippedPolicy
	if err := json.Unmarshal(raw, &policy); err != nil {
		t.Fatalf("the policy is not valid JSON: %v", err)
	}
	return policy
}
