"""``python -m laneway``: the ``laneway`` command."""

from laneway.cli import main

if __name__ == "__main__":
    main()
