/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package awsemu

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"k8s.io/utils/clock"
)

const iamNamespace = "https://iam.amazonaws.com/doc/2010-05-08/"

// codeNoSuchEntity is IAM's error code for a role or instance profile that does not exist.
const codeNoSuchEntity = "NoSuchEntity"

// IAM is the emulated IAM: roles (added by the test or the sandbox; nothing creates them through the API) and
// the instance profiles Stevedore creates, tags, fills with a role and deletes.
type IAM struct {
	account   string
	partition string
	clock     clock.PassiveClock

	mu       sync.Mutex
	roles    map[string]time.Time
	profiles map[string]*InstanceProfile
	nextID   int
}

// InstanceProfile is an emulated IAM instance profile.
type InstanceProfile struct {
	Name, Path, ID string
	Created        time.Time
	// Roles holds at most one role name, as IAM allows.
	Roles []string
	Tags  map[string]string
}

func newIAM(account, partition string, clk clock.PassiveClock) *IAM {
	return &IAM{account: account, partition: partition, clock: clk, roles: map[string]time.Time{}, profiles: map[string]*InstanceProfile{}}
}

// AddRole registers an IAM role.
func (i *IAM) AddRole(name string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.roles[name] = i.clock.Now()
}

// AddInstanceProfile registers an instance profile holding role (the user's own, for spec.instanceProfile).
func (i *IAM) AddInstanceProfile(name, role string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.roles[role] = i.clock.Now()
	i.profiles[name] = &InstanceProfile{Name: name, Path: "/", ID: i.newID(), Created: i.clock.Now(), Roles: []string{role},
		Tags: map[string]string{}}
}

// InstanceProfiles returns a copy of every instance profile, by name.
func (i *IAM) InstanceProfiles() map[string]InstanceProfile {
	i.mu.Lock()
	defer i.mu.Unlock()
	out := map[string]InstanceProfile{}
	for name, p := range i.profiles {
		c := *p
		c.Roles = append([]string(nil), p.Roles...)
		c.Tags = cloneMap(p.Tags)
		out[name] = c
	}
	return out
}

// HasInstanceProfile reports whether an instance profile exists (CreateFleet refuses launch templates naming
// one that does not).
func (i *IAM) HasInstanceProfile(name string) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	_, ok := i.profiles[name]
	return ok
}

func (i *IAM) newID() string {
	i.nextID++
	return fmt.Sprintf("AIPA%016X", i.nextID)
}

type iamError struct {
	status        int
	code, message string
}

func (i *IAM) handle(w http.ResponseWriter, q *query) {
	i.mu.Lock()
	defer i.mu.Unlock()
	action := q.Str("Action")
	var result any
	var err *iamError
	switch action {
	case "GetInstanceProfile":
		result, err = i.getInstanceProfile(q)
	case "CreateInstanceProfile":
		result, err = i.createInstanceProfile(q)
	case "TagInstanceProfile":
		err = i.tagInstanceProfile(q)
	case "AddRoleToInstanceProfile":
		err = i.addRole(q)
	case "RemoveRoleFromInstanceProfile":
		err = i.removeRole(q)
	case "DeleteInstanceProfile":
		err = i.deleteInstanceProfile(q)
	default:
		err = &iamError{http.StatusBadRequest, "InvalidAction", "the emulator does not implement IAM action " + action}
	}
	if err != nil {
		writeIAMError(w, err)
		return
	}
	writeIAM(w, action, result)
}

func noProfile(name string) *iamError {
	return &iamError{http.StatusNotFound, codeNoSuchEntity, "Instance Profile " + name + " cannot be found."}
}

type xmlIAMRole struct {
	Path       string `xml:"Path"`
	RoleName   string `xml:"RoleName"`
	RoleID     string `xml:"RoleId"`
	Arn        string `xml:"Arn"`
	CreateDate string `xml:"CreateDate"`
}

type xmlIAMTag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type xmlInstanceProfile struct {
	Path                string       `xml:"Path"`
	InstanceProfileName string       `xml:"InstanceProfileName"`
	InstanceProfileID   string       `xml:"InstanceProfileId"`
	Arn                 string       `xml:"Arn"`
	CreateDate          string       `xml:"CreateDate"`
	Roles               []xmlIAMRole `xml:"Roles>member"`
	Tags                []xmlIAMTag  `xml:"Tags>member"`
}

type instanceProfileResult struct {
	InstanceProfile xmlInstanceProfile `xml:"InstanceProfile"`
}

func (i *IAM) render(p *InstanceProfile) instanceProfileResult {
	out := xmlInstanceProfile{Path: p.Path, InstanceProfileName: p.Name, InstanceProfileID: p.ID,
		Arn: "arn:" + i.partition + ":iam::" + i.account + ":instance-profile" + p.Path + p.Name, CreateDate: p.Created.UTC().Format(time.RFC3339)}
	for _, r := range p.Roles {
		out.Roles = append(out.Roles, xmlIAMRole{Path: "/", RoleName: r, RoleID: "AROA" + strings.ToUpper(r),
			Arn: "arn:" + i.partition + ":iam::" + i.account + ":role/" + r, CreateDate: i.roles[r].UTC().Format(time.RFC3339)})
	}
	for _, k := range sortedKeys(p.Tags) {
		out.Tags = append(out.Tags, xmlIAMTag{Key: k, Value: p.Tags[k]})
	}
	return instanceProfileResult{InstanceProfile: out}
}

func (i *IAM) getInstanceProfile(q *query) (any, *iamError) {
	name := q.Str("InstanceProfileName")
	p, ok := i.profiles[name]
	if !ok {
		return nil, noProfile(name)
	}
	return i.render(p), nil
}

// iamTags reads a Tags.member.N list.
func iamTags(q *query) map[string]string {
	out := map[string]string{}
	members := q.Get("Tags").Get("member")
	for n := 1; ; n++ {
		m, ok := members.children[fmt.Sprint(n)]
		if !ok {
			return out
		}
		out[m.Str("Key")] = m.Str("Value")
	}
}

func (i *IAM) createInstanceProfile(q *query) (any, *iamError) {
	name := q.Str("InstanceProfileName")
	if name == "" || len(name) > 128 {
		return nil, &iamError{http.StatusBadRequest, "ValidationError", "instanceProfileName must have length between 1 and 128"}
	}
	if _, ok := i.profiles[name]; ok {
		return nil, &iamError{http.StatusConflict, "EntityAlreadyExists", "Instance Profile " + name + " already exists."}
	}
	path := q.Str("Path")
	if path == "" {
		path = "/"
	}
	if !strings.HasPrefix(path, "/") || !strings.HasSuffix(path, "/") {
		return nil, &iamError{http.StatusBadRequest, "ValidationError", "path must begin and end with /"}
	}
	p := &InstanceProfile{Name: name, Path: path, ID: i.newID(), Created: i.clock.Now(), Tags: iamTags(q)}
	i.profiles[name] = p
	return i.render(p), nil
}

func (i *IAM) tagInstanceProfile(q *query) *iamError {
	name := q.Str("InstanceProfileName")
	p, ok := i.profiles[name]
	if !ok {
		return noProfile(name)
	}
	for k, v := range iamTags(q) {
		p.Tags[k] = v
	}
	return nil
}

func (i *IAM) addRole(q *query) *iamError {
	name, role := q.Str("InstanceProfileName"), q.Str("RoleName")
	p, ok := i.profiles[name]
	if !ok {
		return noProfile(name)
	}
	if _, ok := i.roles[role]; !ok {
		return &iamError{http.StatusNotFound, codeNoSuchEntity, "The role with name " + role + " cannot be found."}
	}
	if len(p.Roles) > 0 {
		return &iamError{http.StatusConflict, "LimitExceeded", "Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1"}
	}
	p.Roles = []string{role}
	return nil
}

func (i *IAM) removeRole(q *query) *iamError {
	name, role := q.Str("InstanceProfileName"), q.Str("RoleName")
	p, ok := i.profiles[name]
	if !ok {
		return noProfile(name)
	}
	for n, r := range p.Roles {
		if r == role {
			p.Roles = append(p.Roles[:n], p.Roles[n+1:]...)
			return nil
		}
	}
	return &iamError{http.StatusNotFound, codeNoSuchEntity, "The role with name " + role + " is not in instance profile " + name + "."}
}

func (i *IAM) deleteInstanceProfile(q *query) *iamError {
	name := q.Str("InstanceProfileName")
	p, ok := i.profiles[name]
	if !ok {
		return noProfile(name)
	}
	if len(p.Roles) > 0 {
		return &iamError{http.StatusConflict, "DeleteConflict", "Cannot delete entity, must remove roles from instance profile first."}
	}
	delete(i.profiles, name)
	return nil
}

// writeIAM writes an IAM Query-protocol response: <ActionResponse><ActionResult>…</ActionResult><ResponseMetadata>.
func writeIAM(w http.ResponseWriter, action string, result any) {
	var b strings.Builder
	b.WriteString(xml.Header)
	fmt.Fprintf(&b, `<%sResponse xmlns="%s">`, action, iamNamespace)
	if result != nil {
		inner, err := xml.Marshal(result)
		if err != nil {
			writeIAMError(w, &iamError{http.StatusInternalServerError, "ServiceFailure", err.Error()})
			return
		}
		// the result type's own element name is replaced by <ActionResult>
		s := string(inner)
		s = s[strings.IndexByte(s, '>')+1 : strings.LastIndexByte(s, '<')]
		fmt.Fprintf(&b, "<%sResult>%s</%sResult>", action, s, action)
	}
	fmt.Fprintf(&b, "<ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata></%sResponse>", uuid.NewString(), action)
	w.Header().Set("Content-Type", "text/xml")
	_, _ = w.Write([]byte(b.String()))
}

func writeIAMError(w http.ResponseWriter, e *iamError) {
	typ := "Sender"
	if e.status >= 500 {
		typ = "Receiver"
	}
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(e.status)
	_, _ = fmt.Fprintf(w, `%s<ErrorResponse xmlns="%s"><Error><Type>%s</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>%s</RequestId></ErrorResponse>`,
		xml.Header, iamNamespace, typ, e.code, xmlEscape(e.message), uuid.NewString())
}

func xmlEscape(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// signedFor returns the service a SigV4 Authorization header was signed for ("ec2", "iam").
func signedFor(authorization string) string {
	_, rest, ok := strings.Cut(authorization, "Credential=")
	if !ok {
		return ""
	}
	scope, _, _ := strings.Cut(rest, ",")
	parts := strings.Split(scope, "/")
	if len(parts) < 5 {
		return ""
	}
	return parts[3]
}
