/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package aws

import (
	"context"
	"fmt"
)

// pager is an aws-sdk-go-v2 paginator: each service's paginators have this shape, with the service's options.
type pager[Page, Options any] interface {
	HasMorePages() bool
	NextPage(ctx context.Context, optFns ...func(*Options)) (Page, error)
}

// eachPage hands every page of a paginated call to each, in order; an error names the call (what).
func eachPage[Page, Options any](ctx context.Context, what string, p pager[Page, Options], each func(Page)) error {
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		each(page)
	}
	return nil
}
