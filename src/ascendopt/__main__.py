from ascendopt.cli import main

main()
