/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"errors"
	"regexp"
	"strings"

	"github.com/aws/smithy-go"
)

// Error codes EC2 uses for a pool (instance type, zone, capacity type) that cannot launch now. The offering goes
// into the unavailable-offerings cache and the launch tries the others.
var capacityErrorCodes = map[string]bool{
	"InsufficientInstanceCapacity":      true,
	"InsufficientCapacity":              true,
	"UnfulfillableCapacity":             true,
	"Unsupported":                       true,
	"InsufficientFreeAddressesInSubnet": true,
	"SpotMaxPriceTooLow":                true,
	"MaxSpotInstanceCountExceeded":      true,
}

// configHints explain errors only the user can fix.
var configHints = map[string]string{
	"AuthFailure.ServiceLinkedRoleCreationNotPermitted": "the EC2 Spot service-linked role is missing and Stevedore may not create it: run `aws iam create-service-linked-role --aws-service-name spot.amazonaws.com` once per account",
	"VcpuLimitExceeded":                        "the account's vCPU quota for this instance family is reached: request a higher quota in Service Quotas",
	"MaxSpotInstanceCountExceeded":             "the account's spot instance quota is reached: request a higher quota in Service Quotas",
	"UnauthorizedOperation":                    "the controller's IAM role lacks a permission: compare it with deploy/iam/stevedore-controller-policy.json",
	"InvalidParameterValue":                    "a launch parameter was refused; check the EC2NodeClass",
	"InvalidAMIID.NotFound":                    "the AMI does not exist or is not shared with the account; check amiSelectorTerms",
	"InvalidSubnetID.NotFound":                 "a selected subnet no longer exists",
	"InvalidGroup.NotFound":                    "a selected security group no longer exists",
	"InvalidParameterValue.IamInstanceProfile": "the instance profile does not exist: check the EC2NodeClass instanceProfile (with role, Stevedore creates the profile)",
}

// requestIDs matches the request IDs the AWS SDK puts in its error messages ("RequestID: 1f3e...,"), which differ
// on every call.
var requestIDs = regexp.MustCompile(`(?i)request ?id: [^,\s]*,? ?`)

// StableMessage is err's message without the per-call request IDs: the same failure gives the same message, so a
// status condition that carries it is not rewritten (and its object's watchers not woken) on every retry.
func StableMessage(err error) string {
	return strings.TrimSpace(requestIDs.ReplaceAllString(err.Error(), ""))
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// isNotFound reports whether an EC2 error says an instance does not exist.
func isNotFound(err error) bool {
	code := errorCode(err)
	return code == "InvalidInstanceID.NotFound" || code == "InvalidInstanceID.Malformed"
}

func isLaunchTemplateNotFound(err error) bool {
	return strings.HasPrefix(errorCode(err), "InvalidLaunchTemplateName.NotFound") || errorCode(err) == "InvalidLaunchTemplateId.NotFound"
}

func isAlreadyExists(err error) bool {
	return strings.Contains(errorCode(err), "AlreadyExists")
}

// isParameterNotFound reports whether an SSM error says a parameter does not exist.
func isParameterNotFound(err error) bool { return errorCode(err) == "ParameterNotFound" }
