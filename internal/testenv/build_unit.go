//go:build !integration

package testenv

// integrationBuild is false in a plain `go test` build (`make unit`): no test
// of it may reach the stack (see requireIntegrationBuild).
const integrationBuild = false
