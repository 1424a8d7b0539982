/* Subcommands of the stembridge CLI that live in their own files. Each returns the exit status. */
#ifndef SB_CLI_COMMANDS_H
#define SB_CLI_COMMANDS_H
int sb_cli_models(int argc, char **argv);   /* tools/cli/cmd_models.c: list, install, remove */
int sb_cli_batch(int argc, char **argv);    /* tools/cli/cmd_batch.c: a list of files, sharded */
int sb_cli_devices(int argc, char **argv);  /* tools/cli/cmd_devices.c: list devices */
#endif
