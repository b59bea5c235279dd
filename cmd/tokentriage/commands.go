package main

// commands is every tokentriage subcommand, in the order the usage lists
// them. Adding a command is a new file that defines it and one line here.
var commands = []*command{
	validateCmd,
	keysMintCmd, keysListCmd, keysRevokeCmd, keysRotateCmd,
	countersResetCmd, countersCreditCmd,
	accountantCmd,
	previewCmd,
	spendCmd,
	devCmd,
	versionCmd,
}
