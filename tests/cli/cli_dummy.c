/* cli_dummy.c: an unrelated preload library (libcli_dummy.so), to check that
 * `vx run` keeps what LD_PRELOAD already holds. */
int cli_dummy_marker(void) {
  return 42;
}
