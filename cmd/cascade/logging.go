package main

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json, as Kubernetes components offer it
)

// Logging is k8s.io/component-base's, as in kube-controller-manager and the other Kubernetes
// components: --logging-format (text or json), -v, --vmodule and --log-flush-frequency. klog's
// legacy flags (--logtostderr, --log-dir, --alsologtostderr, ...), which Kubernetes components
// dropped, are not offered.

// loggingFeatures is the feature gate of the logging options (contextual logging, the alpha and
// beta output options), at component-base's defaults: cascade exposes no --feature-gates.
var loggingFeatures = func() featuregate.MutableVersionedFeatureGate {
	g := featuregate.NewFeatureGate()
	if err := logsapi.AddFeatureGates(g); err != nil {
		panic(err) // a fixed set registered once on a new gate: cannot conflict
	}
	return g
}()

// loggingFlagOf names the flag behind a field of component-base's LoggingConfiguration, so
// that a bad value is reported by the flag the user typed.
var loggingFlagOf = map[string]string{
	"format":                      "--logging-format",
	"verbosity":                   "-v",
	"vmodule":                     "--vmodule",
	"flushFrequency":              "--log-flush-frequency",
	"options.text.splitStream":    "--log-text-split-stream",
	"options.text.infoBufferSize": "--log-text-info-buffer-size",
	"options.json.splitStream":    "--log-json-split-stream",
	"options.json.infoBufferSize": "--log-json-info-buffer-size",
}

// validateLogging checks the logging flags without applying them.
func validateLogging(c *logsapi.LoggingConfiguration) field.ErrorList {
	errs := logsapi.Validate(c, loggingFeatures, nil)
	for i := range errs {
		name, _, _ := strings.Cut(strings.TrimPrefix(errs[i].Field, "."), "[") // vmodule[2]: the flag
		if f, ok := loggingFlagOf[name]; ok {
			errs[i].Field = f
		}
	}
	return errs
}

// applyLogging makes the logging flags take effect; once per process, before anything logs.
func applyLogging(c *logsapi.LoggingConfiguration) error {
	return logsapi.ValidateAndApply(c, loggingFeatures)
}
