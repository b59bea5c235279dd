// Package shared holds the pure Go used by both sides of tokentriage: the
// filter (built for wasip1) and the native accountant. Nothing under shared/
// reads a clock, touches the network or calls the host; time is a parameter.
package shared
