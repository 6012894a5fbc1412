package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// UpdatePriorityStrategy orders a rolling update by the Pods' labels. Set one of
// weightPriority and orderPriority.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.weightPriority) && size(self.weightPriority) > 0 && has(self.orderPriority) && size(self.orderPriority) > 0)",message="weightPriority is set too: rank the pods either by weights or by ordered keys; remove one of the two lists",fieldPath=".orderPriority"
type UpdatePriorityStrategy struct {
	// OrderPriority ranks the Pods by the values of label keys. The Pods carrying the first
	// key come first, ordered by the number its value ends with, highest first ("sts-10"
	// before "sts-9"; a value that ends with no digit counts as 0); then the remaining Pods
	// carrying the second key, ordered the same way; and so on. Pods carrying none of the
	// keys come last.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	OrderPriority []UpdatePriorityOrderTerm `json:"orderPriority,omitempty"`

	// WeightPriority gives each Pod the sum of the weights of the terms whose selector
	// matches its labels: Pods with a higher sum are updated first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	WeightPriority []UpdatePriorityWeightTerm `json:"weightPriority,omitempty"`
}

// UpdatePriorityOrderTerm is one label key of an orderPriority.
type UpdatePriorityOrderTerm struct {
	// OrderedKey is the label key whose value ranks the Pods (the number the value ends
	// with).
	// +kubebuilder:validation:MinLength=1
	OrderedKey string `json:"orderedKey"`
}

// UpdatePriorityWeightTerm adds its weight to the priority of the Pods its selector matches.
type UpdatePriorityWeightTerm struct {
	// Weight is added to the priority of every Pod that MatchSelector matches; 0 to 100.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Weight int32 `json:"weight"`

	// MatchSelector selects the Pods, by their labels, that get the weight. It must not be
	// empty.
	MatchSelector metav1.LabelSelector `json:"matchSelector"`
}

// UpdateScatterTerm names the Pods of a scatterStrategy: those whose label Key has Value, or
// every value of Key in turn when Value is "*".
type UpdateScatterTerm struct {
	// Key is a label key.
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`

	// Value is the label's value, or "*" for each of its values.
	// +kubebuilder:validation:MinLength=1
	Value string `json:"value"`
}
