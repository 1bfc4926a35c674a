// Package changelog mirrors store writes into Kafka changelog topics and runs the at-least-once commit of a task.
package changelog
