import Foundation
import StoreCLI

exit(Targets.mainApp.run(CommandLine.arguments))
