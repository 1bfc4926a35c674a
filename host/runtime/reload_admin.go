package runtime

import (
	"context"
	"errors"
	"net/http"
)

// postReload is POST /v1/reload: it reloads the configuration file the application runs with
// (ReloadFile), whatever the request's body, and answers the ReloadResult: 200 when it applied
// (its changes, none when the file changed nothing), 422 when it was refused (its diagnostics,
// each with file and line; nothing changed), 503 when the application is not running, 504
// when the tasks reached no commit boundary in time (nothing of it applied but its new topics
// and topic configs), 500 otherwise. The reload goes on if the client goes away.
func (r *Runtime) postReload(w http.ResponseWriter, req *http.Request) {
	res, err := r.ReloadFile(context.WithoutCancel(req.Context()), "api")
	code := http.StatusOK
	switch {
	case err == nil:
	case errors.Is(err, ErrReloadRefused):
		code = http.StatusUnprocessableEntity
	case errors.Is(err, ErrNotRunning):
		code = http.StatusServiceUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		code = http.StatusGatewayTimeout
	default:
		code = http.StatusInternalServerError
	}
	writeJSON(w, code, res)
}
