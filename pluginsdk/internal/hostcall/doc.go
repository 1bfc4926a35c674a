// Package hostcall is the seam between the SDK and a host that runs in the same process:
// natively, sdktest installs an in-memory host here and drives the SDK's entry points.
package hostcall
