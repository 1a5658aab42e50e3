import './base.css';
import './sidebar.css';
import './admin.css';
import './usage.css';
import './increases.css';
import './recommendations.css';
