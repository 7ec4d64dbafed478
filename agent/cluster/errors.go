package cluster

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// explain says what an API error means for the operator.
func explain(err error) error {
	switch {
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the API server refused the kubeconfig's credentials (401 Unauthorized): %w", err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("the API server refused the request for these credentials (403 Forbidden; a node's user is system:node:<name> in group system:nodes): %w", err)
	}
	return err
}
