from rewind.cli import main

main()
