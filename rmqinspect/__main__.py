from .cli.lifecycle import entry

if __name__ == "__main__":
    entry()  # the signal handlers before the commands are imported (cli.lifecycle)
