from roofline.cli.app import main

main()
