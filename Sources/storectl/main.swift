import Foundation
import StoreCLI

exit(Targets.storectl.run(CommandLine.arguments))
