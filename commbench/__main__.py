from commbench.cli import main

main()
