package identity

import (
	"errors"
	"net/http"

	"github.com/memgate/memgate/internal/apierr"
)

// headerNamer is implemented by resolver errors that blame one header.
type headerNamer interface{ HeaderName() string }

// APIError translates a Resolver error into the error the client sees: 401, 403, or 400
// naming the offending header.
func APIError(err error) *apierr.Error {
	switch {
	case errors.Is(err, ErrUnauthorized):
		return &apierr.Error{Status: http.StatusUnauthorized, Type: apierr.TypeAuthentication, Code: "invalid_api_key",
			Message: "A valid gateway key is required: Authorization: Bearer <key>."}
	case errors.Is(err, ErrLoopbackOnly):
		return &apierr.Error{Status: http.StatusForbidden, Type: apierr.TypePermission, Code: "admin_loopback_only",
			Message: "The management API answers only clients on this host until a key is configured: set admin_key (GATEWAY_ADMIN_KEY) or gateway keys."}
	case errors.Is(err, ErrForbidden):
		return &apierr.Error{Status: http.StatusForbidden, Type: apierr.TypePermission, Code: "tenant_forbidden",
			Message: "This key may not act for the requested tenant."}
	}
	param := ""
	var hn headerNamer
	if errors.As(err, &hn) {
		param = hn.HeaderName()
	}
	return apierr.Invalid(param, err.Error())
}
