package service

import "syscall"

// devRedisProcAttr: the dev Redis dies with the process that started it,
// even when that process is killed.
func devRedisProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
