package testenv

import (
	"testing"
)

func TestStartRedis(t *testing.T) {
	r := StartRedis(t)
	if !ping(r.Addr) {
		t.Fatal("redis did not answer PING")
	}
	r.Stop()
	if ping(r.Addr) {
		t.Fatal("redis still answers after Stop")
	}
}
