// Package sdktest checks oncehook against the providers' own SDKs: what
// each SDK signs, a gateway accepts; what `oncehook send` (the presets'
// Sign) produces, each SDK's verifier accepts; and what oncehook delivers,
// the Standard Webhooks library verifies. It is a module of its own, so
// that the SDKs never become dependencies of oncehook itself.
package sdktest
