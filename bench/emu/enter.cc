// bench/emu/enter: root's login shell as the emulated hosts' sshd sees it
// (emu.sh gives that sshd an /etc/passwd of its own), so sshd runs every
// command as `enter -c COMMAND`; a small program rather than a script
// because every command sent to every emulated host goes through it. The host is the address the client
// connected to (SSH_CONNECTION's third word, 127.1.x.y); the command runs
// in a mount namespace of its own where /tmp is that host's directory
// $BARGE_EMU_DIR/hosts/ADDR, so emulated hosts share no /tmp (barge's
// per-host job directory /tmp/barge-<job id>.<random>, the fake engine's state).
// With BARGE_EMU_API set (the sshd's SetEnv under `emu.sh up N --api`), the
// command also sees that host's Engine API socket as
// DOCKER_HOST=unix://$BARGE_EMU_DIR/hosts-api/ADDR/docker.sock (served by
// bench/emu/fake-engine.py) and $BARGE_EMU_DIR/bin first on PATH, where
// `docker` is fake-docker (for the CLI calls a plain-docker client makes).
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  const char* conn = std::getenv("SSH_CONNECTION");
  const char* root = std::getenv("BARGE_EMU_DIR");
  if (!conn || !root) {
    std::fprintf(stderr, "emu-enter: SSH_CONNECTION or BARGE_EMU_DIR is not set\n");
    return 255;
  }
  char client[64], server[64];
  int cport = 0;
  if (std::sscanf(conn, "%63s %d %63s", client, &cport, server) != 3) {
    std::fprintf(stderr, "emu-enter: cannot read SSH_CONNECTION '%s'\n", conn);
    return 255;
  }
  const std::string host = std::string(root) + "/hosts/" + server;
  if (access(host.c_str(), F_OK) != 0) {
    std::fprintf(stderr, "emulated host %s is not set up (no %s)\n", server, host.c_str());
    return 255;
  }
  if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      mount(host.c_str(), "/tmp", nullptr, MS_BIND, nullptr) != 0) {
    std::fprintf(stderr, "emu-enter: cannot give host %s its /tmp: %s\n", server, std::strerror(errno));
    return 255;
  }
  setenv("BARGE_EMU_HOST", server, 1);
  if (const char* api = std::getenv("BARGE_EMU_API"); api && *api) {
    setenv("DOCKER_HOST", ("unix://" + std::string(root) + "/hosts-api/" + server + "/docker.sock").c_str(), 1);
    const char* path = std::getenv("PATH");
    setenv("PATH", (std::string(root) + "/bin:" + (path && *path ? path : "/usr/bin:/bin")).c_str(), 1);
  }
  const char* cmd = argc >= 3 && std::strcmp(argv[1], "-c") == 0 ? argv[2] : nullptr;
  if (cmd && *cmd) {
    execl("/bin/sh", "sh", "-c", cmd, static_cast<char*>(nullptr));
  } else {
    execl("/bin/sh", "sh", static_cast<char*>(nullptr));
  }
  std::fprintf(stderr, "emu-enter: /bin/sh: %s\n", std::strerror(errno));
  return 127;
}
