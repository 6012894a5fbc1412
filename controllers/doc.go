// Package controllers holds the SidecarSet status reconciler.
package controllers
