//go:build integration

package testenv

// integrationBuild is true in a test binary built with -tags integration, the
// only kind whose tests may reach the stack (see requireIntegrationBuild).
const integrationBuild = true
