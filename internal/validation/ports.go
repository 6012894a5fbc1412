package validation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validatePorts checks a container's ports as the API server does: port numbers in range, a
// known protocol, and names that are unique IANA service names (Services refer to them).
func validatePorts(ports []corev1.ContainerPort, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for j := range ports {
		port := &ports[j]
		p := path.Index(j)
		errs = append(errs, validatePortNumber(port.ContainerPort, p.Child("containerPort"))...)
		if port.HostPort != 0 {
			errs = append(errs, validatePortNumber(port.HostPort, p.Child("hostPort"))...)
		}
		errs = append(errs, validateProtocol(port.Protocol, p.Child("protocol"))...)
		if port.Name != "" {
			errs = append(errs, validatePortName(port.Name, names, p.Child("name"))...)
			names.Insert(port.Name)
		}
	}
	return errs
}

func validatePortNumber(port int32, path *field.Path) field.ErrorList {
	return invalidIf(path, port, validation.IsValidPortNum(int(port)), "set the port the container listens on")
}

func validateProtocol(protocol corev1.Protocol, path *field.Path) field.ErrorList {
	switch protocol {
	case "", corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		return nil
	}
	return field.ErrorList{field.NotSupported(path, protocol,
		[]corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP})}
}

func validatePortName(name string, seen sets.Set[string], path *field.Path) field.ErrorList {
	errs := invalidIf(path, name, validation.IsValidPortName(name), "use a short name such as \"http-metrics\"")
	if seen.Has(name) {
		errs = append(errs, duplicate(path, name, fmt.Sprintf(
			"another port of this container is already named %q; give each port its own name", name)))
	}
	return errs
}
