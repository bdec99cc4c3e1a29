// Package fwtest is the firewall packages' test support: the kernel tests'
// namespaces and probes, the found firewalls they load, model builders and
// the DNAT fixtures. Of the firewall packages it imports only the model and
// kernel I/O, so the evaluator's, the marks' and the flip's tests can all
// use it. It is not used outside tests.
package fwtest

import ()
